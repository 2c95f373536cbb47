/* docs/openapi.json, embedded in the binary (served at /v1/openapi.json). */
	.section .rodata
	.global sbx_openapi_json
	.global sbx_openapi_json_end
sbx_openapi_json:
	.incbin "docs/openapi.json"
sbx_openapi_json_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
