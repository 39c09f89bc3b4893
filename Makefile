# ojrunner: the main targets. `make demo` runs a local hub and a runner on
# the example problems; `make test` runs every test.

CARGO   ?= cargo
PREFIX  ?= /usr/local
DESTDIR ?=
BINS     = claimd judge-exec reportd leased runnerd hubd

.PHONY: all build demo test lint bench install clean

all: build

build:
	$(CARGO) build --workspace --bins

demo: build
	$(CARGO) run -q -p ojrunner-tests --bin ojrunner-demo

# Every test: unit tests, the judging suite, the hub and the end-to-end
# suites with real processes, signals and sandboxes. Suites that time
# programs run one test at a time so they do not fight over 2 cores.
test: build
	$(CARGO) test --workspace --no-fail-fast -- --test-threads=1

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man5 \
		$(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/share/ojrunner
	for b in $(BINS); do install -m 755 target/debug/$$b $(DESTDIR)$(PREFIX)/bin/; done
	for m in man/*.[578]; do [ -f "$$m" ] && install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man$${m##*.}/; done; true
	cp -R examples etc $(DESTDIR)$(PREFIX)/share/ojrunner/

clean:
	$(CARGO) clean
