/* The code interpreter's workers (interp/), embedded in the binary and
 * written into every sandbox's skeleton (runtime/image.c) under
 * /opt/sandboxd/interp. Each is followed by a NUL. */
	.section .rodata
	.global sbx_interp_python_worker
	.global sbx_interp_node_worker
sbx_interp_python_worker:
	.incbin "interp/python_worker.py"
	.byte 0
sbx_interp_node_worker:
	.incbin "interp/node_worker.js"
	.byte 0
	.section .note.GNU-stack,"",@progbits
