/* The sandbox init (build/sandboxd-init, runtime/init.c), embedded in the
 * daemon; runtime_new copies it into a sealed memfd that every sandbox
 * start execs. INIT_BIN is the path of the binary, given by the Makefile. */
	.section .rodata
	.global sbx_init_blob
	.global sbx_init_blob_size
	.balign 16
sbx_init_blob:
	.incbin INIT_BIN
sbx_init_blob_end:
	.balign 8
sbx_init_blob_size:
	.quad sbx_init_blob_end - sbx_init_blob
	.section .note.GNU-stack,"",@progbits
