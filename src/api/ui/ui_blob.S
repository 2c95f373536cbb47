/* The web console's files (ui/), embedded in the binary: the console's own
 * from ui/, xterm.js's from the build's copy of ui/node_modules (found
 * through the assembler's include path, -Wa,-I,$(BUILD)/ui). Each file is
 * a symbol and an _end symbol. */
#define FILE(sym, path) \
	.global sym; .global sym##_end; \
	sym: .incbin path; sym##_end:

	.section .rodata
FILE(sbx_ui_index_html, "ui/index.html")
FILE(sbx_ui_app_js, "ui/app.js")
FILE(sbx_ui_app_css, "ui/app.css")
FILE(sbx_ui_xterm_js, "xterm.js")
FILE(sbx_ui_xterm_css, "xterm.css")
FILE(sbx_ui_addon_fit_js, "addon-fit.js")
	.section .note.GNU-stack,"",@progbits
