# The two commands a fresh machine needs (see README.md):
#   make serve   build everything and serve the debugger with the built-in demo trace
#   make test    install what is missing, then run every test (lint, unit, property, wasm, browser, e2e)
.PHONY: serve test tools

tools:
	./scripts/install-tools.sh

serve: tools
	./scripts/serve.sh

test: tools
	./scripts/test.sh
