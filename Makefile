# Thin wrapper around CMake. Every target first installs whatever Debian
# packages are missing (scripts/deps.sh), then configures and builds.
#
#   make demo        build, then run the suite end to end on loopback
#   make check       build, then run the whole test suite (ctest)
#   make check-asan  the same suite built with clang, ASan+UBSan and libFuzzer
#   make bench       build optimised, then run the side-by-side benchmarks
#   make deb         the Debian packages cmon, libcmon0, libcmon-dev in build-deb/
#   make clean       remove the build trees

JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
BUILD   ?= build
ASAN    ?= build-asan
BENCHB  ?= build-bench
DEBB    ?= build-deb
CTEST_ARGS ?=

.PHONY: all deps build demo check check-asan bench deb clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

check: build
	@scripts/run-tests.sh $(BUILD) $(CTEST_ARGS)

check-asan: deps
	@CC=clang cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug \
	    -DCMON_SANITIZE=ON -DCMON_FUZZ=ON >/dev/null
	@cmake --build $(ASAN) -j $(JOBS)
	@scripts/run-tests.sh $(ASAN) $(CTEST_ARGS)

bench:
	@scripts/deps.sh bench
	@cmake -S . -B $(BENCHB) -DCMAKE_BUILD_TYPE=Release -DCMON_TESTS=OFF >/dev/null
	@cmake --build $(BENCHB) -j $(JOBS)
	@bench/run.sh $(BENCHB)

# Out of tree: the sources git knows (tracked, or new and not ignored) are
# copied to $(DEBB)/src and built there; the .debs land in $(DEBB).
deb: deps
	@rm -rf $(DEBB) && mkdir -p $(DEBB)/src
	@git ls-files -z --cached --others --exclude-standard | \
	    tar --null -T - -cf - | tar -xf - -C $(DEBB)/src
	@cd $(DEBB)/src && dpkg-buildpackage -b -us -uc -j$(JOBS) >../build.log 2>&1 || \
	    { tail -n 40 ../build.log; echo "deb: failed, see $(DEBB)/build.log"; exit 1; }
	@ls $(DEBB)/*.deb

clean:
	rm -rf $(BUILD) $(ASAN) $(BENCHB) $(DEBB)
