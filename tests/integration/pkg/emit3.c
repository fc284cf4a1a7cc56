/* emit3 — a client of an installed libcmon: emits three Tick events (n = 0,
 * 1, 2) to the log named by $CMON_LOG. Built against an install tree or the
 * .debs by test_install_prefix.py, test_deb.py and
 * scripts/deb-chroot-test.sh; tick.pspec checks its log. */
#include <cmon/emit.h>
#include <stdio.h>

int main(void)
{
	if (cmon_init("emit3") != 0 || !cmon_enabled()) {
		fprintf(stderr, "emit3: no log (set CMON_LOG)\n");
		return 1;
	}
	cmon_type tick = cmon_declare("Tick", 1, (const char *const[]){ "n" });
	if (tick == 0) {
		perror("emit3: cmon_declare");
		return 1;
	}
	for (int i = 0; i < 3; i++)
		CMON_EMIT(tick, i);
	cmon_flush();
	return 0;
}
