/* Failures (failures.h): silences, store, counters, then the subscribers. */
#include <errno.h>
#include <string.h>

#include "amsilences.h"
#include "failures.h"
#include "hygiene.h"

int failures_subscribe(struct tmon *tm, const struct failure_subscriber *sub)
{
	if (tm->nfailure_subs >= TM_FAILURE_SUBS_MAX)
		return -ENOSPC;
	tm->failure_subs[tm->nfailure_subs++] = sub;
	return 0;
}

int failures_add(struct tmon *tm, const struct failure_event *ev)
{
	struct failure_event e = *ev;
	struct tm_instance *in = e.in;
	struct amsil_alert al = {
		.prog = in->prog, .machine = in->machine, .pid = in->pid, .class_id = e.class_id,
		.assertion = e.f.assertion, .line = e.f.line,
	};
	char am_silence[AMSIL_ID_MAX];
	int r;

	/* one silence model: with an Alertmanager, its silences first */
	if (e.alertmanager && *e.alertmanager &&
	    amsil_silenced(tm, e.alertmanager, &al, e.f.time, am_silence, sizeof am_silence))
		e.f.am_silence = am_silence;
	else
		e.f.silence_id = hygiene_silenced(tm, in->prog, in->machine, e.f.assertion,
						  e.f.line, e.f.time);
	r = store_add_failure(tm->store, &e.f, &e.id);
	if (r < 0)
		return r;
	if (e.f.result && !strcmp(e.f.result, "inconclusive"))
		return 0;                       /* records were lost: stored and shown apart, not
						   counted, mailed nor alerted */
	in->failures++;
	in->dirty = true;
	tm->total_failures++;
	if (e.f.report && !e.notify_reports)
		return 0;                       /* statistics: stored, not mailed nor alerted */
	if (e.f.silence_id || e.f.am_silence)
		return 0;                       /* stored, marked silenced, not mailed nor alerted */
	for (size_t i = 0; i < tm->nfailure_subs; i++)
		if (tm->failure_subs[i]->on_failure)
			tm->failure_subs[i]->on_failure(tm, &e);
	return 0;
}

void failures_adopt(struct tmon *tm, const char *from)
{
	for (size_t i = 0; i < tm->nfailure_subs; i++)
		if (tm->failure_subs[i]->on_adopt)
			tm->failure_subs[i]->on_adopt(tm, from);
}

void failures_instance_ended(struct tmon *tm, uint64_t id)
{
	for (size_t i = 0; i < tm->nfailure_subs; i++)
		if (tm->failure_subs[i]->on_ended)
			tm->failure_subs[i]->on_ended(tm, id);
}
