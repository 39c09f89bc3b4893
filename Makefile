# ojrunner: the main targets. `make demo` runs a local hub and a runner on
# the example problems; `make test` runs every test.

CARGO   ?= cargo
PREFIX  ?= /usr/local
DESTDIR ?=
BINS     = claimd judge-exec reportd leased runnerd hubd

# Debian's /usr/bin/rustc (1.63, installed to judge rust) must never build
# the project, whatever the order of PATH: with rustup, cargo uses its rustc.
ifneq ($(shell command -v rustup 2>/dev/null),)
export RUSTC ?= $(shell rustup which rustc)
endif

.PHONY: all build release deps demo test nextest test-cgroup2 soak soak-net fuzz lint bench bench-e2e install uninstall clean

all: build

build:
	$(CARGO) build --workspace --bins

release:
	$(CARGO) build --release --workspace --bins

# What a fresh Debian or Ubuntu machine lacks for the demo and the tests:
# every program the language table's commands name (etc/languages.json:
# each absolute path in a compile or run command, installed from its
# package in LANG_PACKAGES; a program the table names that is missing and
# not in that map stops make deps, naming it), mandoc
# for the man page lint, runit and s6 for the supervision tests (without
# recommends: runit-run would take over as init), prometheus for promtool's
# lint of the metrics, systemd for systemd-analyze's check of the units
# (neither is started), iproute2 and nftables for the test hosts of the
# lossy network suite. Installed when missing,
# as root with apt-get; anywhere else, a message names them.
DEB_PACKAGES = gcc g++ make python3 mandoc rustc runit s6 prometheus systemd iproute2 nftables

# The Debian package of each program the language table may name (Debian's
# rustc, not its cargo; the JDK, headless, for javac and java).
LANG_PACKAGES = /usr/bin/gcc:gcc /usr/bin/g++:g++ /usr/bin/python3:python3 /usr/bin/rustc:rustc \
	/usr/bin/javac:default-jdk-headless /usr/bin/java:default-jdk-headless
LANG_PROGRAMS = $(shell grep -o '"/[^"]*"' etc/languages.json | tr -d '"' | sort -u)

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	for prog in $(LANG_PROGRAMS); do \
		[ -x "$$prog" ] && continue; \
		pkg=""; for m in $(LANG_PACKAGES); do [ "$${m%%:*}" = "$$prog" ] && pkg="$${m#*:}"; done; \
		if [ -z "$$pkg" ]; then \
			echo "make deps: etc/languages.json names $$prog, which is missing; add its package to LANG_PACKAGES" >&2; \
			exit 1; \
		fi; \
		case " $$missing " in *" $$pkg "*) ;; *) missing="$$missing $$pkg";; esac; \
	done; \
	[ -z "$$missing" ] && exit 0; \
	if ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ]; then \
		echo "make deps: install these Debian/Ubuntu packages (as root, --no-install-recommends):$$missing" >&2; \
		exit 1; \
	fi; \
	echo "make deps: installing$$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null

demo: deps build
	$(CARGO) run -q -p ojrunner-tests --bin ojrunner-demo

# Every test, run by cargo-nextest (a process per test; .config/nextest.toml
# holds the groups) in two phases. First every test that times programs
# (the unit tests, judging, hostile, helpers, checkers, cores, ...), one at
# a time, so that none fights another over 2 cores; then the suites that
# mostly wait (on a hub, a drain, a supervisor), side by side, each at its
# own concurrency and with slot uids of its own (tests/support/lanes.rs).
# No retries: a test that fails once fails the run. Each test's line, and
# the output of each that failed, go to stdout and target/test.log; every
# test by suite, with a failure's output, to target/test-logs/timing.xml
# and waiting.xml (JUnit); the daemons' own logs to
# target/test-logs/daemons/ (a failing test prints the tail of each of its
# daemons'; OJ_TEST_QUIET=0 shows them live). The last line totals both
# phases, and how many tests skipped themselves (testkit::skip), each named
# with why in target/test-logs/skipped.log. `judge-exec run`'s compile cache
# is target/test-cache, new each run (XDG_CACHE_HOME), never the user's.
SHELL := /bin/bash
OJ_TEST_QUIET ?= 1
export OJ_TEST_QUIET

# Slot uids and lock directory of this checkout's own (judge-exec(8)), so
# that two checkouts on one host can run `make test` at once: a range of
# 2048 uids from 100000, chosen by the checkout's path.
ifndef OJ_SLOT_UID_BASE
OJ_SLOT_UID_BASE := $(shell echo $$(( 100000 + $$(printf '%s' '$(CURDIR)' | cksum | cut -d' ' -f1) % 997 * 2048 )))
endif
OJ_SLOT_LOCK_DIR ?= $(CURDIR)/target/slot-locks
export OJ_SLOT_UID_BASE OJ_SLOT_LOCK_DIR

NEXTEST = $(CARGO) nextest run --workspace --no-fail-fast

test: deps build nextest
	@set -o pipefail; rc=0; rm -rf target/test-logs target/test-cache; mkdir -p target/test-logs; \
	export XDG_CACHE_HOME="$(CURDIR)/target/test-cache"; \
	$(NEXTEST) --profile timing -E 'group(=timing)' 2>&1 | tee target/test.log || rc=1; \
	$(NEXTEST) --profile waiting -E 'not group(=timing)' 2>&1 | tee -a target/test.log || rc=1; \
	skipped=$$(cat target/test-logs/skipped.log 2>/dev/null | wc -l); \
	awk -v s=$$skipped '$$1 == "Summary" { for (i = 2; i < NF; i++) { \
		if ($$(i+1) ~ /^passed/) p += $$i; if ($$(i+1) ~ /^(failed|timed|exec)/) f += $$i } } \
		END { printf "%d passed (%d of them skipped: target/test-logs/skipped.log), %d failed\n", p, s, f }' target/test.log; \
	exit $$rc

# cargo-nextest, installed when missing as nexte.st advises: its prebuilt
# binary of the 0.9 series (cargo-binstall's, or the release archive into
# cargo's bin directory); where neither can be had (no binstall, no way to
# get.nexte.st), built from source, which takes minutes.
nextest:
	@set -o pipefail; $(CARGO) nextest --version >/dev/null 2>&1 && exit 0; \
	echo "make: installing cargo-nextest"; \
	case "$$(uname -m)" in x86_64) arch=linux ;; aarch64) arch=linux-arm ;; *) arch= ;; esac; \
	if command -v cargo-binstall >/dev/null && $(CARGO) binstall -y --secure cargo-nextest@0.9; then exit 0; fi; \
	if [ -n "$$arch" ] && command -v curl >/dev/null && \
		curl -LsSf https://get.nexte.st/0.9/$$arch | tar zxf - -C $${CARGO_HOME:-$$HOME/.cargo}/bin; then exit 0; fi; \
	echo "make: no prebuilt cargo-nextest reached; building it (minutes)"; \
	$(CARGO) install cargo-nextest --locked

# tests/cgroup2.rs in a qemu guest that boots Debian's kernel on cgroup v2
# (tests/cgroup2/run-in-guest installs qemu, the kernel and virtme-ng when
# missing): the runner in a cgroup shaped as systemd delegates a service's.
# At most OJ_GUEST_TIMEOUT seconds (1200), the guest's boot included.
test-cgroup2: deps build
	@set -o pipefail; \
	exe=$$($(CARGO) test --test cgroup2 --no-run 2>&1 | sed -n 's/.*(\(.*cgroup2-[0-9a-f]*\)).*/\1/p' | head -1); \
	[ -n "$$exe" ] || { echo "make test-cgroup2: no test binary for tests/cgroup2.rs" >&2; exit 1; }; \
	mkdir -p target/test-logs; \
	OJ_SLOT_LOCK_DIR=/run/ojrunner-test-locks tests/cgroup2/run-in-guest --rwdir target/test-logs -- "$$exe" --test-threads=1 2>&1 | \
		tee target/test-cgroup2.log

# A longer chaos run than make test's minute: SOAK_SECS of blows.
SOAK_SECS ?= 600

soak: deps build
	OJ_CHAOS_SECS=$(SOAK_SECS) $(CARGO) test --test chaos -- --nocapture

# Runners on a lossy network, whole (tests/lossy_net.rs; make test runs a
# short version): a hubd and 4 runners on test hosts of their own, links
# losing 20 % and delayed 200 ± 100 ms each way, cuts of 60 s, a hub
# restart, 300 submissions. As root (network namespaces).
soak-net: deps build
	OJ_NET_RUNNERS=4 OJ_NET_SUBMISSIONS=300 OJ_NET_CUT_SECS=60 \
		$(CARGO) test --test lossy_net -- --nocapture

# Speed and accuracy of the sandbox, as ratios against baselines measured
# in the same run (see BENCHMARKS.md). Reports; never gates.
bench:
	$(CARGO) build --release --workspace --bins
	$(CARGO) run --release -q -p ojrunner-tests --bin ojrunner-bench

# A real hubd and runnerd end to end (issue #16): submission to verdict over
# judge-exec run, the idle drain, one hubd under 1,000 waiting polls, jobs
# per second. Ratios against baselines of the same run; reports, never gates.
bench-e2e:
	$(CARGO) build --release --workspace --bins
	$(CARGO) run --release -q -p ojrunner-tests --bin ojrunner-bench-e2e

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --document-private-items

# Fuzzing (issue #23): each target of fuzz/ (cargo-fuzz, libFuzzer) for
# FUZZ_SECS seconds, one after another, one process at a time. A target is
# one line calling its function in crates/fuzzing, which `make test`
# replays on every file of fuzz/corpus/<target>/ and fuzz/regressions/<target>/
# (kept small: the seeds, fuzz/seeds/make-seeds.py, and a few dozen inputs
# of a run minimised by `cargo fuzz cmin`). New inputs go to
# fuzz/work/<target>/ (not kept); a crasher lands in fuzz/artifacts/<target>/:
# fix it, with a test, and keep it in fuzz/regressions/<target>/.
#
# On stable Rust (1.95 here; no nightly can be fetched) cargo-fuzz's
# default build fails: AddressSanitizer needs -Zsanitizer, a nightly flag.
# `--sanitizer none` builds on stable as it is (libFuzzer's coverage,
# debug assertions and overflow checks all on); ASan would find little
# more in a crate without unsafe code of its own. -timeout: an input that
# takes 10 s is a hang, reported as a crash; TMPDIR: the targets that
# unpack or write files do it on tmpfs.
FUZZ_SECS    ?= 60
FUZZ_TARGETS ?= hub_register hub_next_job hub_answer testdata_zip checker duration hubd_request problem_add icpc_package spool_rows
FUZZ_FLAGS    = --sanitizer none

fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz
	cd fuzz && $(CARGO) fuzz build $(FUZZ_FLAGS)
	@cd fuzz && for t in $(FUZZ_TARGETS); do \
		echo "make fuzz: $$t for $(FUZZ_SECS) s"; \
		mkdir -p work/$$t corpus/$$t regressions/$$t; \
		TMPDIR=$${TMPDIR:-/dev/shm} $(CARGO) fuzz run $(FUZZ_FLAGS) $$t work/$$t corpus/$$t regressions/$$t -- \
			-max_total_time=$(FUZZ_SECS) -timeout=10 -jobs=1 -workers=1 -print_final_stats=1 || exit 1; \
	done

# Where things go. runnerd and hubd are section-8 daemons: sbin. The stages
# only runnerd starts go to LIBEXECDIR, where runnerd looks for them (its
# ../libexec/ojrunner; another LIBEXECDIR needs OJ_LIBEXEC). judge-exec is
# also an admin's command (run, --probe), so sbin gets a link to it: one
# file to upgrade, and any capabilities set on it hold for both names.
# runit and s6 service directories are templates to copy (or link) into a
# scan directory, so they go to DATADIR with the env file examples; the
# systemd units go where systemd looks for PREFIX's units.
SBINDIR    ?= $(PREFIX)/sbin
LIBEXECDIR ?= $(PREFIX)/libexec/ojrunner
MANDIR     ?= $(PREFIX)/share/man
DATADIR    ?= $(PREFIX)/share/ojrunner
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SBIN_BINS   = runnerd hubd
STAGES      = claimd judge-exec reportd leased
UNITS       = runnerd.service hubd.service
ENV_EXAMPLES = etc/languages.json etc/ojrunner.env etc/hubd.env
# Trees copied whole, as source:destination under DATADIR.
TREES       = examples:examples etc/runit:runit etc/s6:s6

# The binaries installed: release builds (the tests lay out debug ones
# with BUILT=target/debug).
BUILT ?= target/release

# The scripts' fallback PATH and the units' ExecStart= name /usr/local's
# programs; what is installed names PREFIX's.
SCRIPT_PATH = ^PATH=\$$PATH:/usr/local/sbin:/usr/local/libexec/ojrunner$$

install: release
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DATADIR)/examples $(DESTDIR)$(DATADIR)/runit $(DESTDIR)$(DATADIR)/s6 \
		$(DESTDIR)$(UNITDIR)
	for b in $(SBIN_BINS); do install -m 755 $(BUILT)/$$b $(DESTDIR)$(SBINDIR)/ || exit 1; done
	for b in $(STAGES); do install -m 755 $(BUILT)/$$b $(DESTDIR)$(LIBEXECDIR)/ || exit 1; done
	ln -sf $(LIBEXECDIR)/judge-exec $(DESTDIR)$(SBINDIR)/judge-exec
	for m in man/*.[578]; do install -m 644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/ || exit 1; done
	for t in $(TREES); do cp -R $${t%%:*}/. $(DESTDIR)$(DATADIR)/$${t#*:}/ || exit 1; done
	grep -rl '$(SCRIPT_PATH)' $(DESTDIR)$(DATADIR)/runit $(DESTDIR)$(DATADIR)/s6 | while read -r f; do \
		sed 's|$(SCRIPT_PATH)|PATH=$$PATH:$(SBINDIR):$(LIBEXECDIR)|' "$$f" > "$$f.new" && \
		cat "$$f.new" > "$$f" && rm -f "$$f.new" || exit 1; \
	done
	install -m 644 $(ENV_EXAMPLES) $(DESTDIR)$(DATADIR)/
	for u in $(UNITS); do \
		sed 's|^ExecStart=|ExecStart=$(SBINDIR)/|' etc/systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u && \
		chmod 644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done

# Removes what install installed, file by file (an operator's files left
# in DATADIR stay, and so do their directories); then ojrunner's own
# directories, if empty.
uninstall:
	for b in $(SBIN_BINS) judge-exec; do rm -f $(DESTDIR)$(SBINDIR)/$$b; done
	for b in $(STAGES); do rm -f $(DESTDIR)$(LIBEXECDIR)/$$b; done
	for m in man/*.[578]; do rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m#man/}; done
	for u in $(UNITS); do rm -f $(DESTDIR)$(UNITDIR)/$$u; done
	for e in $(ENV_EXAMPLES); do rm -f $(DESTDIR)$(DATADIR)/$${e#etc/}; done
	for t in $(TREES); do \
		dst=$(DESTDIR)$(DATADIR)/$${t#*:}; \
		(cd $${t%%:*} && find . ! -type d) | while read -r f; do rm -f "$$dst/$$f"; done; \
		(cd $${t%%:*} && find . -mindepth 1 -depth -type d) | while read -r d; do rmdir "$$dst/$$d" 2>/dev/null || :; done; \
		rmdir "$$dst" 2>/dev/null || :; \
	done
	rmdir $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DATADIR) 2>/dev/null || :

clean:
	$(CARGO) clean
