# Lachesis build. `make build` compiles the Go core once as a c-shared
# library and the thin C plugins against the Debian source of the installed
# Slurm; everything links with -z nodelete because Slurm dlcloses plugins
# and a Go runtime cannot be unloaded.
SHELL      := /bin/bash
GO         ?= go
# One build tree per Slurm release (build/slurm-22.05, build/slurm-24.11),
# so a checkout holds the builds for both and neither rebuilds the other's:
# derived from the installed slurmctld (scripts/releases.sh), or set
# LACHESIS_BUILD. Exported: the cluster tests, the demo and mkdeb.sh read it.
LACHESIS_BUILD ?= $(shell bash scripts/releases.sh build-dir)
export LACHESIS_BUILD
BUILD      := $(LACHESIS_BUILD)
PLUGINS    := $(BUILD)/plugins
SLURM_SRC  := $(BUILD)/slurm-src
BIN        := $(BUILD)/bin
CORE       := $(PLUGINS)/liblachesis_core.so

CFLAGS_PLUGIN := -fPIC -O2 -g -Wall -Werror=implicit-function-declaration \
	-Werror=int-conversion -Werror=incompatible-pointer-types \
	-include $(SLURM_SRC)/config.h -I$(SLURM_SRC) -I$(SLURM_SRC)/src/common \
	-Icgo -Islurmctld-hook
LDFLAGS_PLUGIN := -shared -L$(PLUGINS) -llachesis_core \
	-Wl,-rpath,'$$ORIGIN' -Wl,-z,nodelete -Wl,--no-undefined-version

GO_SRC   := $(shell find . -name '*.go' -not -path './build/*' 2>/dev/null) go.mod go.sum
HOOK_SRC := slurmctld-hook/lachesis_hook.c slurmctld-hook/lachesis_hook.h slurmctld-hook/reason_text.h cgo/lachesis_core.h \
	$(wildcard slurmctld-hook/slurm_compat*.h)


export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build commands deb deps eval fuzz gpu-check install slurm-src test test-unit test-cluster bench bench-ctld demo demo-profile fidelity clean fmt vet

all: build

# Every target that compiles or runs depends on deps first: cgo needs munge.h
# and the cluster needs Slurm. install-deps.sh is idempotent and takes about a
# second when everything is there, so a fresh machine needs no manual step.
deps:
	bash scripts/install-deps.sh

# The Slurm source the plugins compile against: the installed slurmctld's,
# or, with SLURM_DEB_VERSION and SLURM_DEB_CODENAME (e.g. 24.11.5-4+deb13u1
# trixie), another release's, to compile for it on this machine.
slurm-src: $(SLURM_SRC)/config.h
$(SLURM_SRC)/config.h: | deps
	bash scripts/slurm-src.sh $(SLURM_SRC) $(SLURM_DEB_VERSION) $(SLURM_DEB_CODENAME)

build: $(CORE) $(PLUGINS)/priority_tiresias.so $(PLUGINS)/preempt_tiresias.so $(PLUGINS)/job_submit_synergy.so $(PLUGINS)/lachesis_jobend.so commands

commands: deps
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

$(CORE): $(GO_SRC) cgo/lachesis_core.h | deps
	@mkdir -p $(PLUGINS)
	$(GO) build -buildmode=c-shared -trimpath -o $@ \
		-ldflags "-extldflags '-Wl,-z,nodelete -Wl,-soname,liblachesis_core.so'" ./cgo

$(PLUGINS)/%.so: slurmctld-hook/%.c $(HOOK_SRC) $(CORE) $(SLURM_SRC)/config.h
	$(CC) $(CFLAGS_PLUGIN) -o $@ $< slurmctld-hook/lachesis_hook.c $(LDFLAGS_PLUGIN)

# job_submit/synergy has more source files: placement (issue 12) and the
# handoff to the core's sizing goroutine.
PLACEMENT_SRC := slurmctld-hook/job_submit_placement.c slurmctld-hook/job_submit_placement.h
HANDOFF_SRC := slurmctld-hook/size_handoff.c slurmctld-hook/size_handoff.h
$(PLUGINS)/job_submit_synergy.so: slurmctld-hook/job_submit_synergy.c $(PLACEMENT_SRC) $(HANDOFF_SRC) $(HOOK_SRC) $(CORE) $(SLURM_SRC)/config.h
	$(CC) $(CFLAGS_PLUGIN) -o $@ $< slurmctld-hook/job_submit_placement.c slurmctld-hook/size_handoff.c slurmctld-hook/lachesis_hook.c $(LDFLAGS_PLUGIN)

# The SPANK plugin runs in slurmstepd on compute nodes: no Go core there.
$(PLUGINS)/lachesis_jobend.so: slurmd-spank/lachesis_jobend.c $(SLURM_SRC)/config.h
	@mkdir -p $(PLUGINS)
	$(CC) -fPIC -O2 -g -Wall -Werror -I$(SLURM_SRC) -shared -o $@ $<

# Unit tests need no Slurm; cluster tests start a real one on loopback.
# scripts/make-test.sh runs the phases (deps, build, unit, cluster) and
# prints each one's wall time and the slowest cluster tests at the end.
test:
	@bash scripts/make-test.sh

test-unit: deps
	CGO_ENABLED=0 $(GO) test ./policy/... ./sim/... ./profile/...
	$(GO) test -race $$($(GO) list ./... | grep -v /tests/)

# Cluster tests run CLUSTER_PARALLEL at a time, each on its own cluster
# (tests/cluster/parallel_test.go); those that must run alone run first,
# one by one. On 2 cores 4 was fastest of 2, 3 and 4 (README, "What make
# test runs"); CLUSTER_PARALLEL=1 runs them one after another.
CLUSTER_PARALLEL ?= 4

# The test binary stops its clusters itself; the loop below also stops any
# left behind by a test binary that died (timeout, crash). The accounting
# packages are installed first, so parallel clusters never install them at
# once.
test-cluster: build deb
	@bash scripts/install-deps.sh slurmdbd
	@mkdir -p $(BUILD); rc=0; \
	$(GO) test -count=1 -timeout 25m -v -parallel $(CLUSTER_PARALLEL) ./tests/cluster/... > $(BUILD)/test-cluster.log 2>&1 || rc=$$?; \
	grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:|^\s+' $(BUILD)/test-cluster.log | grep -vE '^\s+(=====|[0-9]{4}-|\[)' ; \
	for d in $${LACHESIS_TEST_DIR:-/tmp/lachesis-test}/*/; do [ -d "$$d" ] && LACHESIS_CLUSTER_DIR=$$d bash scripts/cluster.sh down >/dev/null 2>&1; done; \
	if [ $$rc -ne 0 ]; then echo "cluster tests failed; full log in $(BUILD)/test-cluster.log"; tail -n 200 $(BUILD)/test-cluster.log; fi; \
	exit $$rc

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./policy/priority/
	$(GO) test -run '^$$' -bench Philly512 -benchtime 1x ./sim/
	$(BIN)/lachesis-sim -trace data/philly/philly_jobs.csv -policies gittins -parallel 1 -bench
	$(GO) test -run "^$$" -bench . -benchmem -benchtime 10x ./internal/controller/core/
	$(GO) test -run '^$$' -bench ProfileFlood -benchtime 5000x ./internal/controller/agentserver/
	$(GO) test -run '^$$' -bench CacheFlood -benchtime 2000x ./internal/controller/profilestore/
	$(GO) test -run '^$$' -bench . -benchmem ./node-agent/jobprogress/
	@$(MAKE) --no-print-directory bench-ctld
	@if [ -z "$$LACHESIS_IN_ROOT" ] && [ "$${LACHESIS_RELEASES:-both}" != host ]; then \
		echo "== slurmctld benchmarks on the other Slurm release (scripts/release-root.sh)"; \
		bash scripts/release-root.sh run $(MAKE) --no-print-directory build bench-ctld; \
	fi

# Inside slurmctld (docs/benchmarks.md): sbatch throughput with and without
# job_submit/synergy, slurmctld's CPU under priority/tiresias against
# priority/multifactor, as ratios in one run, on the Slurm this build tree
# is for; `make bench` runs it on both releases.
bench-ctld: build
	@echo "== slurmctld benchmarks on Slurm $$(bash scripts/releases.sh slurm)"
	$(GO) run ./cmd/lachesis-ctldbench

# The simulator's evaluation (docs/evaluation): ~10 minutes on 2 cores.
eval: commands
	bash docs/evaluation/run.sh

# DEMO_FLAGS passes lachesis-demo's flags, e.g. DEMO_FLAGS='-dir /tmp/d
# -port-base 23817' beside another demo on the machine (or in a release root:
# `scripts/release-root.sh run make demo` runs it on the other Slurm).
demo: build
	$(GO) run ./cmd/lachesis-demo $(DEMO_FLAGS)

# The simulator held against the real thing (issue 23): a Philly slice
# replayed 20x compressed on the loopback cluster (4 nodes x 4 GPUs) under
# multifactor and 2D-Gittins, and the same jobs through the simulator, side
# by side (docs/evaluation, section 7). About 13 minutes; not part of
# `make test`. FIDELITY_FLAGS passes lachesis-replay's flags, e.g.
# FIDELITY_FLAGS='-policies las -jobs 40'.
fidelity: build
	$(BIN)/lachesis-replay -csv $(BUILD)/fidelity.csv $(FIDELITY_FLAGS)

# A real PyTorch training job (etc/demo/train_image.py, CPU) profiled through
# the node agent, its profile stored by the controller, then a plain sbatch
# of it sized from that profile; the chart goes to demo-profile.png in the
# build tree.
# Not part of `make test`: Debian's torch is large and the run takes minutes.
demo-profile: build
	bash scripts/install-deps.sh torch
	$(BIN)/lachesis-demo -part profile -bin $(BIN) -png $(BUILD)/demo-profile.png

# The GPU check (docs/gpu-check.md): build/gpu-check/ and
# build/lachesis-gpu-check.tar.gz, a bundle that runs on a machine with
# only the NVIDIA driver (`sh gpu-check.sh` as root). The two binaries are
# Go with cgo (go-nvml and the loader dlopen the driver's libraries at run
# time), so they link glibc and nothing else: checked here with ldd, as is
# the bundle's size. Not part of `make test`: CI has no GPU.
GPUCHECK := build/gpu-check
GPUCHECK_MAX_BYTES := 62914560
gpu-check:
	@rm -rf $(GPUCHECK) && mkdir -p $(GPUCHECK)
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags '-s -w' -o $(GPUCHECK)/ ./cmd/lachesis-gpuload ./cmd/lachesis-gpucheck
	install -m 0755 scripts/gpu-check.sh $(GPUCHECK)/gpu-check.sh
	install -m 0644 docs/gpu-check.md $(GPUCHECK)/README.md
	@for b in $(GPUCHECK)/lachesis-gpuload $(GPUCHECK)/lachesis-gpucheck; do \
		libs=$$(ldd $$b | awk '{print $$1}'); \
		extra=$$(echo "$$libs" | grep -vxE 'linux-vdso\.so\.1|libc\.so\.6|libdl\.so\.2|libpthread\.so\.0|/lib64/ld-linux-x86-64\.so\.2'); \
		if [ -n "$$extra" ]; then echo "$$b links more than glibc: $$extra"; exit 1; fi; \
		echo "$$b: links only" $$libs "(glibc" $$(objdump -T $$b | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n1) "at most)"; \
	done
	tar -C build -czf build/lachesis-gpu-check.tar.gz gpu-check
	@size=$$(du -cb $(GPUCHECK)/* | tail -n1 | cut -f1); tgz=$$(stat -c %s build/lachesis-gpu-check.tar.gz); \
	echo "bundle $(GPUCHECK): $$size bytes (build/lachesis-gpu-check.tar.gz: $$tgz bytes)"; \
	if [ $$size -gt $(GPUCHECK_MAX_BYTES) ]; then echo "bundle over 60 MiB"; exit 1; fi

# Fuzz the parsers that face the network and users (a while each).
fuzz: deps
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 2m ./internal/protocol/wire
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime 2m ./internal/protocol/wire
	$(GO) test -run '^$$' -fuzz '^FuzzReadAck$$' -fuzztime 1m ./internal/protocol/wire
	$(GO) test -run '^$$' -fuzz '^FuzzReply$$' -fuzztime 1m ./node-agent/deliver
	$(GO) test -run '^$$' -fuzz '^FuzzDecide$$' -fuzztime 1m ./policy/synergy
	$(GO) test -run '^$$' -fuzz '^FuzzGPUs$$' -fuzztime 1m ./policy/gres
	$(GO) test -run '^$$' -fuzz '^FuzzParseMarker$$' -fuzztime 1m ./internal/controller/core
	$(GO) test -run '^$$' -fuzz '^FuzzParseSizing$$' -fuzztime 1m ./policy/synergy
	$(GO) test -run '^$$' -fuzz '^FuzzLogLineIsOneLineOfPrintableText$$' -fuzztime 1m ./internal/util/logging
	$(GO) test -run '^$$' -fuzz '^FuzzField$$' -fuzztime 1m ./internal/util/reasontext
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 1m ./internal/util/yamlconf
	$(GO) test -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime 1m ./node-agent/localapi

# Debian packages lachesis-slurmctld and lachesis-node-agent in the build
# tree's deb/, for its Slurm release and depending on it (docs/install.md,
# "Installing on a real cluster"); the cluster tests install them.
deb: build
	bash scripts/mkdeb.sh $(BUILD)/deb

# Install on a real cluster without packages: plugins (and the SPANK plugin lachesis_jobend with
# its plugstack.conf.d line, never overwritten) into Slurm's plugin directory (the
# controller), the node agent and CLI (compute nodes, admins).
SLURM_PLUGIN_DIR ?= /usr/lib/x86_64-linux-gnu/slurm-wlm
install: build
	install -D -m 0755 -t $(DESTDIR)$(SLURM_PLUGIN_DIR) $(CORE) $(PLUGINS)/priority_tiresias.so \
		$(PLUGINS)/preempt_tiresias.so $(PLUGINS)/job_submit_synergy.so $(PLUGINS)/lachesis_jobend.so
	[ -e $(DESTDIR)/etc/slurm/plugstack.conf.d/lachesis-jobend.conf ] || { install -d $(DESTDIR)/etc/slurm/plugstack.conf.d && \
		printf 'optional %s/lachesis_jobend.so socket=/run/lachesis/agent.sock\n' $(SLURM_PLUGIN_DIR) \
		>$(DESTDIR)/etc/slurm/plugstack.conf.d/lachesis-jobend.conf; }
	install -D -m 0755 $(BIN)/lachesis-node-agent $(DESTDIR)/usr/sbin/lachesis-node-agent
	install -D -m 0755 $(BIN)/lachesis-profiler $(DESTDIR)/usr/bin/lachesis-profiler
	install -D -m 0644 docs/man/lachesis-node-agent.8 $(DESTDIR)/usr/share/man/man8/lachesis-node-agent.8
	install -D -m 0644 docs/man/lachesis-profiler.1 $(DESTDIR)/usr/share/man/man1/lachesis-profiler.1
	install -D -m 0644 etc/lachesis-node-agent.service $(DESTDIR)/etc/systemd/system/lachesis-node-agent.service
	install -D -m 0644 etc/lachesis_progress.py $(DESTDIR)/usr/share/lachesis/python/lachesis_progress.py
	install -D -m 0644 -t $(DESTDIR)/usr/share/lachesis/gavel data/gavel/throughputs.csv data/gavel/colocated.csv
	[ -e $(DESTDIR)/etc/lachesis/node-agent.yaml ] || install -D -m 0644 etc/node-agent.yaml $(DESTDIR)/etc/lachesis/node-agent.yaml

fmt:
	gofmt -w $$(git ls-files '*.go')

vet: deps
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet ./policy/...

clean:
	rm -rf $(BIN) $(PLUGINS)
