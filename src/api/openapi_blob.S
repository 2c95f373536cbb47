/* docs/openapi.json, embedded in the binary (served at /v1/openapi.json),
 * followed by a NUL. */
	.section .rodata
	.global sbx_openapi_json
sbx_openapi_json:
	.incbin "docs/openapi.json"
	.byte 0
	.section .note.GNU-stack,"",@progbits
