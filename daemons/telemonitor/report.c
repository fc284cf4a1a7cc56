/* The checker's report lines (see report.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <pspec/pspec.h>

#include "report.h"

/* A NUL-terminated copy of v's source text, kept in r->owned; NULL on
 * ENOMEM. */
static const char *own_source(struct checker_report *r, const struct json *v, size_t *len)
{
	for (size_t i = 0; i < sizeof r->owned / sizeof r->owned[0]; i++)
		if (!r->owned[i]) {
			r->owned[i] = json_source_dup(v);
			*len = v->srclen;
			return r->owned[i];
		}
	return NULL;
}

/* A field's text: a container's source text (as print and witness may
 * be), otherwise json_text. False on ENOMEM. */
static bool text_field(struct checker_report *r, const struct json *v, const char **out,
		       size_t *len)
{
	if (v && (v->kind == JSON_OBJECT || v->kind == JSON_ARRAY)) {
		*out = own_source(r, v, len);
		return *out != NULL;
	}
	*out = json_text(v);
	*len = *out ? (v->kind == JSON_STRING || v->kind == JSON_NUMBER ? v->len : 1) : 0;
	return true;
}

int report_parse(const char *line, size_t len, struct checker_report *r)
{
	const struct json *v;
	struct json *root;
	char err[128];
	size_t n;

	memset(r, 0, sizeof *r);
	root = json_parse(line, len, err, sizeof err);
	if (!root)
		return errno == ENOMEM ? -ENOMEM : REPORT_NOT_A_REPORT;
	if (root->kind != JSON_OBJECT) {
		json_free(root);
		return REPORT_NOT_A_REPORT;
	}
	r->root = root;
	if ((v = json_get(root, "print"))) {
		r->has_print = true;
		r->print_kind = v->kind;
		if (!text_field(r, v, &r->print, &n))
			goto out_nomem;
	}
	r->spec = json_text(json_get(root, "spec"));
	r->assertion = json_text(json_get(root, "assert"));
	r->line = (int)json_as_int(json_get(root, "line"));
	r->result = json_text(json_get(root, "result"));
	r->note = json_text(json_get(root, "note"));
	r->kind = json_text(json_get(root, "kind"));
	r->type = json_text(json_get(root, "type"));
	v = json_get(root, "uid");
	r->has_uid = v && v->kind != JSON_NULL;
	r->uid = json_as_int(v);
	r->start = json_text(json_get(root, "start"));
	r->end = json_text(json_get(root, "end"));
	v = json_get(root, "start_ts");
	r->has_ts = v && v->kind != JSON_NULL;
	r->start_ts_kind = v ? v->kind : JSON_NULL;
	r->start_ts = json_as_int(v);
	r->end_ts = json_as_int(json_get(root, "end_ts"));
	if ((v = json_get(root, "offenders"))) {
		r->has_offenders = true;
		r->offenders_kind = v->kind;
		r->offenders = json_as_int(v);
	}
	r->report = json_as_int(json_get(root, "report")) != 0;
	r->count = json_as_int(json_get(root, "count"));
	r->metrics_tree = json_get(root, "metrics");
	if (r->metrics_tree && r->metrics_tree->kind == JSON_OBJECT) {
		r->has_metrics = true;
		if (!(r->metrics = own_source(r, r->metrics_tree, &r->metrics_len)))
			goto out_nomem;
	}
	r->witness_tree = json_get(root, "witness");
	if (!text_field(r, r->witness_tree, &r->witness, &r->witness_len))
		goto out_nomem;
	if ((v = json_get(root, "summary")) && v->kind == JSON_TRUE) {
		const struct json *k = json_get(root, "sketch");
		r->has_summary = true;
		r->metric = json_text(json_get(root, "metric"));
		r->sum = json_as_double(json_get(root, "sum"));
		r->sumsq = json_as_double(json_get(root, "sumsq"));
		r->min = json_as_double(json_get(root, "min"));
		r->max = json_as_double(json_get(root, "max"));
		if (k && k->kind == JSON_OBJECT && !(r->sketch = own_source(r, k, &r->sketch_len)))
			goto out_nomem;
	}
	return 0;
out_nomem:
	report_free(r);
	return -ENOMEM;
}

/* pcheck --json's word for a result (libpspec's report.c). */
static const char *result_word(pspec_result res)
{
	switch (res) {
	case PSPEC_PASS:
		return "pass";
	case PSPEC_FAIL:
		return "fail";
	case PSPEC_INCONCLUSIVE:
		return "inconclusive";
	default:
		return "undefined";
	}
}

int report_of_offender(const pspec_report *pr, char **scratch, size_t *cap,
		       struct checker_report *r)
{
	char start[PSPEC_POSITION_MAX], end[PSPEC_POSITION_MAX];
	const char *file = pspec_report_file(pr), *label = pspec_report_label(pr);
	const char *type = pspec_report_type(pr);
	size_t nfile, nlabel, ntype, nstart, nend, nmetrics;
	char *p;

	memset(r, 0, sizeof *r);
	if (pspec_report_kind_of(pr) != PSPEC_REPORT_OFFENDER)
		return -EINVAL;
	nstart = pspec_report_position(pr, false, start, sizeof start);
	nend = pspec_report_position(pr, true, end, sizeof end);
	nmetrics = pspec_report_metrics_into(pr, scratch, cap);
	nfile = file ? strlen(file) + 1 : 0;
	nlabel = label ? strlen(label) + 1 : 0;
	ntype = type ? strlen(type) + 1 : 0;
	/* every text in one block, kept in owned[0] */
	p = malloc(nfile + nlabel + ntype + nstart + 1 + nend + 1 + nmetrics + 1);
	if (!p)
		return -ENOMEM;
	r->owned[0] = p;
#define OWN(field, text, n)                  \
	do {                                 \
		memcpy(p, (text), (n));      \
		(field) = p;                 \
		p += (n);                    \
	} while (0)
	if (file)
		OWN(r->spec, file, nfile);
	if (label)
		OWN(r->assertion, label, nlabel);
	if (type)
		OWN(r->type, type, ntype);
	OWN(r->start, start, nstart + 1);
	OWN(r->end, end, nend + 1);
	OWN(r->metrics, *scratch, nmetrics);
	*p = '\0';
#undef OWN
	r->metrics_len = nmetrics;
	r->has_metrics = true;
	r->line = (int)pspec_report_line(pr);
	r->result = result_word(pspec_report_result(pr));
	r->report = pspec_report_is_stats(pr);
	r->has_ts = true;
	r->start_ts_kind = JSON_NUMBER;
	r->start_ts = pspec_report_start_ts(pr);
	r->end_ts = pspec_report_end_ts(pr);
	r->has_uid = true;
	if (pspec_report_is_interval(pr)) {
		uint64_t uid = pspec_report_uid(pr);
		r->kind = "interval";
		r->uid = uid > INT64_MAX ? INT64_MAX : (int64_t)uid;
	} else {
		r->kind = "event";
		r->uid = strtoll(start, NULL, 10);       /* "uid":"R.S", read as R */
	}
	return 0;
}

void report_free(struct checker_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < sizeof r->owned / sizeof r->owned[0]; i++)
		free(r->owned[i]);
	json_free(r->root);
	memset(r, 0, sizeof *r);
}

/* A triple's component: a number, or null (not finite) as NAN. False for
 * anything else. */
static bool component(const struct json *v, double *out)
{
	if (!v || (v->kind != JSON_NUMBER && v->kind != JSON_NULL))
		return false;
	*out = v->kind == JSON_NUMBER ? v->num : NAN;
	return true;
}

/* The value `v` named `name` read by the one rule (report.h). */
static void metric_read(const char *name, const struct json *v, struct report_metric *m)
{
	double t[3];

	*m = (struct report_metric){ .name = name, .kind = REPORT_METRIC_OTHER, .value = NAN,
				     .node = v };
	switch (v->kind) {
	case JSON_NULL:
		m->kind = REPORT_METRIC_UNDEFINED;
		break;
	case JSON_NUMBER:
		m->kind = REPORT_METRIC_NUMBER;
		m->value = v->num;
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		m->kind = REPORT_METRIC_BOOLEAN;
		m->value = v->kind == JSON_TRUE;
		break;
	case JSON_ARRAY:
		if (v->count != 3 || !component(v->kids, &t[0]) ||
		    !component(v->kids->next, &t[1]) || !component(v->kids->next->next, &t[2]))
			break;
		m->kind = REPORT_METRIC_TRIPLE;
		m->value = t[0];
		m->plus = t[1];
		m->minus = t[2];
		break;
	case JSON_OBJECT:
		m->kind = REPORT_METRIC_MAPPING;
		break;
	case JSON_STRING:
		break;
	}
	m->has_value = !isnan(m->value);
}

int report_metrics_each(const struct json *metrics, report_metric_fn fn, void *arg)
{
	struct report_metric m;
	int rc;

	if (!metrics || metrics->kind != JSON_OBJECT)
		return -EINVAL;
	for (const struct json *v = metrics->kids; v; v = v->next) {
		metric_read(v->key, v, &m);
		if ((rc = fn(arg, &m)))
			return rc;
	}
	return 0;
}

int report_metrics_each_text(const char *text, report_metric_fn fn, void *arg)
{
	struct json *root;
	int rc;

	if (!text)
		return -EINVAL;
	root = json_parse(text, strlen(text), NULL, 0);
	if (!root)
		return errno == ENOMEM ? -ENOMEM : -EINVAL;
	rc = report_metrics_each(root, fn, arg);
	json_free(root);
	return rc;
}
