/* Unit tests for the telemonitor's JSON reader (daemons/telemonitor/json.c)
 * and the one parser of checker reports over it (report.c): every kind of
 * value, nesting and source text, escapes (surrogate pairs, and the bad
 * ones), integers exact up to int64, the depth limit, errors with their
 * byte offsets on truncated and garbage text, the field readings the
 * checker relies on, report_parse over real pcheck --json lines, and
 * render_metrics (text.c) against the sqlite JSON functions that rendered
 * the metrics before, over every metrics object of tests/lang. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <glob.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "../../daemons/telemonitor/json.c"
#include "../../daemons/telemonitor/report.c"
#include "../../daemons/telemonitor/text.c"

/* Parse a NUL-terminated text; fail the test if it does not parse. */
static struct json *ok(const char *text)
{
	char err[160];
	struct json *v = json_parse(text, strlen(text), err, sizeof err);

	if (!v)
		fail_msg("%s: %s", text, err);
	return v;
}

/* Parse a text that must not parse; its message must start with `msg`. */
static void bad(const char *text, size_t len, const char *msg)
{
	char err[160] = "untouched";
	struct json *v = json_parse(text, len, err, sizeof err);

	if (v) {
		json_free(v);
		fail_msg("parsed: %.*s", (int)len, text);
	}
	if (strncmp(err, msg, strlen(msg)))
		fail_msg("%.*s: got \"%s\", want \"%s...\"", (int)len, text, err, msg);
	assert_int_equal(errno, EINVAL);
}

#define BAD(text, msg) bad(text, strlen(text), msg)

static void scalars(void **state)
{
	struct json *v;
	int64_t i;

	(void)state;
	v = ok("null");
	assert_int_equal(v->kind, JSON_NULL);
	assert_null(json_text(v));
	json_free(v);
	v = ok(" true\n");
	assert_int_equal(v->kind, JSON_TRUE);
	assert_string_equal(json_text(v), "1");
	assert_int_equal(v->srclen, 4);
	json_free(v);
	v = ok("\tfalse\r\n");
	assert_int_equal(v->kind, JSON_FALSE);
	assert_string_equal(json_text(v), "0");
	json_free(v);
	v = ok("0");
	assert_true(json_int64(v, &i));
	assert_int_equal(i, 0);
	json_free(v);
	v = ok("-12");
	assert_int_equal(v->kind, JSON_NUMBER);
	assert_true(json_int64(v, &i));
	assert_int_equal(i, -12);
	assert_string_equal(v->str, "-12");
	json_free(v);
	v = ok("2.5");
	assert_false(json_int64(v, &i));
	assert_true(v->num == 2.5);
	assert_string_equal(json_text(v), "2.5");
	json_free(v);
	v = ok("-1.25E+2");
	assert_true(v->num == -125.0);
	assert_false(v->is_int);
	assert_string_equal(v->str, "-1.25E+2");
	json_free(v);
	v = ok("1e3");
	assert_true(v->num == 1000.0);
	assert_false(v->is_int);            /* an exponent: not an integer literal */
	json_free(v);
	v = ok("\"text\"");
	assert_int_equal(v->kind, JSON_STRING);
	assert_string_equal(json_str(v), "text");
	assert_int_equal(v->len, 4);
	assert_int_equal(v->srclen, 6);
	json_free(v);
	v = ok("\"\"");
	assert_string_equal(json_str(v), "");
	json_free(v);
	json_free(NULL);
}

static void big_integers(void **state)
{
	struct json *v;
	int64_t i;

	(void)state;
	v = ok("9223372036854775807");
	assert_true(json_int64(v, &i));
	assert_true(i == INT64_MAX);
	json_free(v);
	v = ok("-9223372036854775808");
	assert_true(json_int64(v, &i));
	assert_true(i == INT64_MIN);
	json_free(v);
	v = ok("9007199254740993");         /* 2^53 + 1: not a double, still exact */
	assert_true(json_int64(v, &i));
	assert_true(i == 9007199254740993LL);
	json_free(v);
	v = ok("9223372036854775808");      /* 2^63: beyond int64, kept as text */
	assert_false(json_int64(v, &i));
	assert_string_equal(v->str, "9223372036854775808");
	assert_true(v->num == 9223372036854775808.0);
	assert_true(json_as_int(v) == INT64_MAX);
	json_free(v);
	v = ok("-9223372036854775809");
	assert_false(json_int64(v, &i));
	assert_true(json_as_int(v) == INT64_MIN);
	json_free(v);
	v = ok("123456789012345678901234567890");
	assert_false(json_int64(v, &i));
	assert_string_equal(json_text(v), "123456789012345678901234567890");
	json_free(v);
}

static void nesting(void **state)
{
	const char *text = "{\"a\" : [1, {\"b\":null}, \"x\"], \"c\":{}, \"a\":2, \"d\":[]}";
	struct json *v = ok(text);
	const struct json *a, *e;
	char *src;

	(void)state;
	assert_int_equal(v->kind, JSON_OBJECT);
	assert_int_equal(v->count, 4);
	assert_string_equal(v->kids->key, "a");
	assert_string_equal(v->kids->next->key, "c");
	assert_string_equal(v->kids->next->next->key, "a");
	a = json_get(v, "a");               /* the first of two */
	assert_int_equal(a->kind, JSON_ARRAY);
	assert_int_equal(a->count, 3);
	src = json_source_dup(a);
	assert_string_equal(src, "[1, {\"b\":null}, \"x\"]");
	free(src);
	e = a->kids->next;
	assert_int_equal(e->kind, JSON_OBJECT);
	assert_non_null(json_get(e, "b"));
	assert_int_equal(json_get(e, "b")->kind, JSON_NULL);
	assert_null(json_get(e, "c"));
	assert_string_equal(json_str(e->next), "x");
	assert_null(e->next->next);
	assert_int_equal(json_get(v, "c")->count, 0);
	assert_null(json_get(v, "c")->kids);
	assert_int_equal(json_get(v, "d")->kind, JSON_ARRAY);
	assert_null(json_get(a, "a"));      /* not an object */
	assert_null(json_get(NULL, "a"));
	assert_int_equal(v->srclen, strlen(text));
	json_free(v);
}

static void escapes(void **state)
{
	struct json *v;

	(void)state;
	v = ok("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"");
	assert_string_equal(json_str(v), "\" \\ / \b \f \n \r \t");
	json_free(v);
	v = ok("\"caf\\u00e9 \\u20AC \\ud83d\\ude00 caf\xc3\xa9\"");
	assert_string_equal(json_str(v), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 caf\xc3\xa9");
	json_free(v);
	v = ok("\"a\\u0000b\"");            /* a NUL inside: len tells */
	assert_int_equal(v->len, 3);
	assert_memory_equal(v->str, "a\0b", 4);
	json_free(v);
	/* a NUL inside a name: kept, but never found by a C-string key, so
	 * "a" finds the member named "a", not the "a\0b" before it */
	v = ok("{\"a\\u0000b\":1,\"a\":2}");
	assert_int_equal(v->count, 2);
	assert_int_equal(v->kids->keylen, 3);
	assert_int_equal(json_as_int(json_get(v, "a")), 2);
	assert_memory_equal(v->kids->key, "a\0b", 4);    /* kept, whole */
	assert_int_equal(json_as_int(v->kids), 1);
	json_free(v);
	v = ok("{\"k\\u00e9y\":1}");
	assert_non_null(json_get(v, "k\xc3\xa9y"));
	json_free(v);
	v = ok("\"\\u007f\\u0080\\u07ff\\u0800\\uffff\\udbff\\udfff\"");
	assert_string_equal(json_str(v), "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf");
	json_free(v);
	BAD("\"\\ud83d\"", "offset 1: high surrogate");
	BAD("\"\\ud83dx\"", "offset 1: high surrogate");
	BAD("\"\\ud83d\\u0041\"", "offset 1: high surrogate");
	BAD("\"ab\\ude00\"", "offset 3: lone low surrogate");
	BAD("\"\\u12g4\"", "offset 1: bad \\u escape");
	BAD("\"\\u12\"", "offset 1: bad \\u escape");
	BAD("\"\\x\"", "offset 1: bad escape \\x");
	BAD("\"a\tb\"", "offset 2: control character 0x09");
	BAD("\"a\nb\"", "offset 2: control character 0x0a");
	bad("\"a\0b\"", 5, "offset 2: control character 0x00");
	BAD("\"abc", "offset 4: unterminated string");
	BAD("\"abc\\", "offset 5: unterminated string");
}

static void depth_limit(void **state)
{
	char text[2 * (JSON_DEPTH_MAX + 1) + 1];
	struct json *v;
	char *deep;
	size_t n = 100000;

	(void)state;
	memset(text, '[', JSON_DEPTH_MAX);
	memset(text + JSON_DEPTH_MAX, ']', JSON_DEPTH_MAX);
	text[2 * JSON_DEPTH_MAX] = '\0';
	v = ok(text);                       /* exactly at the limit */
	json_free(v);
	memset(text, '[', JSON_DEPTH_MAX + 1);
	memset(text + JSON_DEPTH_MAX + 1, ']', JSON_DEPTH_MAX + 1);
	text[2 * (JSON_DEPTH_MAX + 1)] = '\0';
	BAD(text, "offset 64: nested deeper than 64");
	deep = malloc(n);                   /* far deeper: an error, not a stack overflow */
	assert_non_null(deep);
	for (size_t i = 0; i < n; i++)
		deep[i] = i % 2 ? '[' : '{';
	bad(deep, n, "offset 1: member name expected");
	memset(deep, '[', n);
	bad(deep, n, "offset 64: nested deeper");
	free(deep);
}

static void errors_with_offsets(void **state)
{
	(void)state;
	BAD("", "offset 0: value expected, not end of text");
	BAD("   ", "offset 3: value expected, not end of text");
	BAD("{\"a\":1", "offset 6: ',' or '}' expected, not end of text");
	BAD("[1,]", "offset 3: value expected, not ']'");
	BAD("[1 2]", "offset 3: ',' or ']' expected, not '2'");
	BAD("{\"a\":1,}", "offset 7: member name expected, not '}'");
	BAD("{\"a\" 1}", "offset 5: ':' expected, not '1'");
	BAD("{1:2}", "offset 1: member name expected, not '1'");
	BAD("{'a':2}", "offset 1: member name expected, not '''");
	BAD("01", "offset 1: leading zero");
	BAD("-01", "offset 2: leading zero");
	BAD("1.", "offset 2: digit expected after the decimal point");
	BAD("1.e5", "offset 2: digit expected after the decimal point");
	BAD(".5", "offset 0: value expected, not '.'");
	BAD("1e", "offset 2: digit expected in the exponent");
	BAD("1e+", "offset 3: digit expected in the exponent");
	BAD("-", "offset 1: digit expected in a number");
	BAD("-x", "offset 1: digit expected in a number");
	BAD("+1", "offset 0: value expected, not '+'");
	BAD("NaN", "offset 0: value expected, not 'N'");
	BAD("Infinity", "offset 0: value expected, not 'I'");
	BAD("tru", "offset 0: unexpected 't'");
	BAD("nul", "offset 0: unexpected 'n'");
	BAD("[true false]", "offset 6: ',' or ']' expected, not 'f'");
	BAD("1 x", "offset 2: 'x' after the value");
	BAD("{} {}", "offset 3: '{' after the value");
	BAD("[1,2", "offset 4: ',' or ']' expected, not end of text");
	BAD("[1,2]\x01", "offset 5: byte 0x01 after the value");
	BAD("/* c */ 1", "offset 0: value expected, not '/'");
	BAD("\xef\xbb\xbf{}", "offset 0: value expected, not byte 0xef");
	bad("{\"a\":1}\0", 8, "offset 7: byte 0x00 after the value");
	/* the text need not be NUL-terminated: only len bytes are read */
	{
		char text[] = { '[', '1', ']', 'x' };
		struct json *v = json_parse(text, 3, NULL, 0);
		assert_non_null(v);
		json_free(v);
		assert_null(json_parse(text, 2, NULL, 0));
	}
}

/* Random garbage and mutations of a report line: an answer, never a crash
 * (the sanitizers watch). */
static void garbage(void **state)
{
	const char *line = "{\"spec\":\"a.pspec\",\"assert\":\"x \\u00e9\",\"line\":3,"
			   "\"metrics\":{\"t\":[1.5e3,1,1],\"m\":{\"1\":2}},\"uid\":-7}";
	size_t n = strlen(line);
	char buf[256];
	unsigned seed = 12345;

	(void)state;
	for (int round = 0; round < 20000; round++) {
		size_t len;
		struct checker_report r;
		memcpy(buf, line, n);
		len = n;
		for (int k = 0; k < 1 + round % 4; k++) {
			seed = seed * 1103515245 + 12345;
			size_t at = (seed >> 8) % n;
			seed = seed * 1103515245 + 12345;
			switch ((seed >> 8) % 3) {
			case 0: buf[at] = (char)(seed >> 16); break;
			case 1: len = at; break;
			default: buf[at] = "{}[]\",:\\u0e-"[(seed >> 16) % 12]; break;
			}
		}
		struct json *v = json_parse(buf, len, NULL, 0);
		json_free(v);
		if (report_parse(buf, len, &r) == 0)
			report_free(&r);
	}
}

static void field_readings(void **state)
{
	struct json *v = ok("{\"s\":\"12.0\",\"t\":true,\"f\":false,\"r\":1.9,\"n\":-1.9,"
			    "\"h\":1e300,\"o\":{},\"z\":null,\"w\":\"  -4x\"}");

	(void)state;
	assert_int_equal(json_as_int(json_get(v, "s")), 12);
	assert_int_equal(json_as_int(json_get(v, "t")), 1);
	assert_int_equal(json_as_int(json_get(v, "f")), 0);
	assert_int_equal(json_as_int(json_get(v, "r")), 1);
	assert_int_equal(json_as_int(json_get(v, "n")), -1);
	assert_true(json_as_int(json_get(v, "h")) == INT64_MAX);
	assert_int_equal(json_as_int(json_get(v, "o")), 0);
	assert_int_equal(json_as_int(json_get(v, "z")), 0);
	assert_int_equal(json_as_int(json_get(v, "w")), -4);
	assert_int_equal(json_as_int(NULL), 0);
	assert_string_equal(json_text(json_get(v, "s")), "12.0");
	assert_string_equal(json_text(json_get(v, "r")), "1.9");
	assert_null(json_text(json_get(v, "o")));
	assert_null(json_text(json_get(v, "z")));
	assert_null(json_text(json_get(v, "missing")));
	json_free(v);
}

/* report_parse over a line, which must be a report. */
static void report_ok(const char *line, struct checker_report *r)
{
	int rc = report_parse(line, strlen(line), r);

	if (rc != 0)
		fail_msg("not a report (%d): %s", rc, line);
}

static void reports_interval_event(void **state)
{
	struct checker_report r;

	(void)state;
	/* tests/lang/fig3_json.expected */
	report_ok("{\"spec\":\"fig3_json.pspec\",\"assert\":null,\"line\":15,\"result\":\"fail\","
		  "\"kind\":\"interval\",\"type\":\"Read\",\"uid\":4,\"start\":\"2.0\",\"end\":\"11.0\","
		  "\"start_ts\":1010,\"end_ts\":14000,\"metrics\":{\"time\":[12990,1,1],"
		  "\"size\":8192,\"hit\":true}}", &r);
	assert_string_equal(r.spec, "fig3_json.pspec");
	assert_null(r.assertion);
	assert_int_equal(r.line, 15);
	assert_string_equal(r.result, "fail");
	assert_string_equal(r.kind, "interval");
	assert_string_equal(r.type, "Read");
	assert_true(r.has_uid);
	assert_int_equal(r.uid, 4);
	assert_string_equal(r.start, "2.0");
	assert_string_equal(r.end, "11.0");
	assert_true(r.has_ts);
	assert_int_equal(r.start_ts_kind, JSON_NUMBER);
	assert_int_equal(r.start_ts, 1010);
	assert_int_equal(r.end_ts, 14000);
	assert_false(r.has_print);
	assert_false(r.has_offenders);
	assert_false(r.report);
	assert_true(r.has_metrics);
	assert_string_equal(r.metrics, "{\"time\":[12990,1,1],\"size\":8192,\"hit\":true}");
	assert_int_equal(r.metrics_len, strlen(r.metrics));
	assert_int_equal(r.metrics_tree->kind, JSON_OBJECT);
	assert_int_equal(json_get(r.metrics_tree, "size")->i, 8192);
	assert_null(r.witness);
	report_free(&r);
	report_free(&r);                    /* emptied: twice is fine */
	/* tests/lang/event_offenders.expected: an event's uid is "R.S" */
	report_ok("{\"spec\":\"event_offenders.pspec\",\"assert\":\"small reads\",\"line\":7,"
		  "\"result\":\"fail\",\"kind\":\"event\",\"type\":\"StartRead\",\"uid\":\"12.0\","
		  "\"start\":\"12.0\",\"end\":\"12.0\",\"start_ts\":15000,\"end_ts\":15000,\"thread\":1,"
		  "\"metrics\":{\"tid\":1,\"size\":65536}}", &r);
	assert_string_equal(r.assertion, "small reads");
	assert_true(r.has_uid);
	assert_int_equal(r.uid, 12);
	assert_string_equal(r.kind, "event");
	report_free(&r);
	/* tests/lang/report_json.expected: from a report assertion */
	report_ok("{\"spec\":\"report_json.pspec\",\"assert\":\"stats\",\"line\":13,\"result\":"
		  "\"fail\",\"report\":true,\"kind\":\"interval\",\"type\":\"Read\",\"uid\":3,"
		  "\"start\":\"8.0\",\"end\":\"10.0\",\"start_ts\":2600,\"end_ts\":12000,"
		  "\"metrics\":{\"time\":[9400,1,1]}}", &r);
	assert_true(r.report);
	report_free(&r);
}

static void reports_verdicts(void **state)
{
	struct checker_report r;

	(void)state;
	/* pcheck --json --explain: a whole-log verdict with its witness */
	report_ok("{\"spec\":\"explain_json.pspec\",\"assert\":\"mean\",\"line\":9,\"result\":"
		  "\"fail\",\"offenders\":0,\"witness\":{\"{mean v : V : v.x}\":2.5,\"Limit\":2}}", &r);
	assert_true(r.has_offenders);
	assert_int_equal(r.offenders_kind, JSON_NUMBER);
	assert_int_equal(r.offenders, 0);
	assert_false(r.has_metrics);
	assert_null(r.metrics);
	assert_string_equal(r.witness, "{\"{mean v : V : v.x}\":2.5,\"Limit\":2}");
	assert_int_equal(r.witness_len, strlen(r.witness));
	assert_int_equal(r.witness_tree->kind, JSON_OBJECT);
	assert_false(r.has_uid);
	assert_int_equal(r.uid, 0);
	assert_false(r.has_ts);
	report_free(&r);
	/* tests/lang/loss_json.expected: records were lost */
	report_ok("{\"spec\":\"loss_json.pspec\",\"assert\":\"fast\",\"line\":9,\"result\":"
		  "\"inconclusive\",\"lost\":2,\"offenders\":1}", &r);
	assert_string_equal(r.result, "inconclusive");
	assert_int_equal(r.offenders, 1);
	report_free(&r);
	report_ok("{\"spec\":\"loss_json.pspec\",\"assert\":\"fast\",\"line\":9,\"result\":"
		  "\"inconclusive\",\"lost\":2,\"kind\":\"interval\",\"type\":\"Read\",\"uid\":2,"
		  "\"start\":\"3.0\",\"end\":\"4.0\",\"start_ts\":20,\"end_ts\":90,"
		  "\"metrics\":{\"time\":[70,1,1]}}", &r);
	assert_false(r.has_offenders);
	assert_string_equal(r.metrics, "{\"time\":[70,1,1]}");
	report_free(&r);
	/* pcheck -cont --json on tests/lang/unclosed: a note, not a verdict */
	report_ok("{\"note\":\"unclosed\",\"spec\":\"unclosed.pspec\",\"line\":10,"
		  "\"type\":\"Request\",\"count\":3}", &r);
	assert_string_equal(r.note, "unclosed");
	assert_null(r.result);
	assert_null(r.assertion);
	assert_int_equal(r.line, 10);
	assert_string_equal(r.type, "Request");
	assert_int_equal(r.count, 3);
	assert_false(r.has_offenders);
	report_free(&r);
	/* pcheck -cont --json on tests/lang/deadline: overdue, no uid nor end */
	report_ok("{\"spec\":\"deadline.pspec\",\"assert\":null,\"line\":8,\"result\":\"fail\","
		  "\"kind\":\"overdue\",\"type\":\"Request\",\"start\":\"2.0\",\"start_ts\":20,"
		  "\"age\":101,\"within\":100}", &r);
	assert_string_equal(r.kind, "overdue");
	assert_false(r.has_uid);
	assert_null(r.end);
	assert_true(r.has_ts);
	assert_int_equal(r.start_ts, 20);
	assert_int_equal(r.end_ts, 0);
	report_free(&r);
	report_ok("{\"offenders\":null,\"start_ts\":null,\"uid\":null}", &r);
	assert_true(r.has_offenders);       /* there, if null */
	assert_int_equal(r.offenders_kind, JSON_NULL);
	assert_false(r.has_ts);
	assert_false(r.has_uid);
	report_free(&r);
}

static void reports_print_and_not(void **state)
{
	struct checker_report r;
	const char *not[] = { "", "   ", "print: x", "[1,2]", "\"str\"", "12", "null",
			      "{\"a\":1", "{\"a\":1}x", "{\"print\":\"\\ud800\"}", NULL };

	(void)state;
	/* tests/lang/json_utf8.expected */
	report_ok("{\"print\":\"caf\xc3\xa9 \\u00ff\"}", &r);
	assert_true(r.has_print);
	assert_int_equal(r.print_kind, JSON_STRING);
	assert_string_equal(r.print, "caf\xc3\xa9 \xc3\xbf");
	report_free(&r);
	report_ok("{\"print\":null}", &r);
	assert_true(r.has_print);
	assert_null(r.print);
	report_free(&r);
	report_ok("{\"print\":{\"a\":[1, 2]}}", &r);
	assert_string_equal(r.print, "{\"a\":[1, 2]}");
	report_free(&r);
	report_ok(" {}\r", &r);
	assert_false(r.has_print);
	assert_null(r.spec);
	report_free(&r);
	for (int i = 0; not[i]; i++) {
		memset(&r, 0xa5, sizeof r);
		assert_int_equal(report_parse(not[i], strlen(not[i]), &r), REPORT_NOT_A_REPORT);
		assert_null(r.root);
		report_free(&r);
	}
}

/* --- render_metrics against sqlite's JSON functions ------------------------------ */

/* The rendering as it was (text.c before json.c), with sqlite doing the
 * parsing: the oracle. */
static void old_value(sqlite3 *db, const char *type, const char *text, struct sbuf *b, int depth);

static void old_members(sqlite3 *db, const char *json, bool object, struct sbuf *b, int depth)
{
	sqlite3_stmt *q;
	bool first = true;

	if (depth >= RENDER_DEPTH_MAX) {
		sb_add(b, "...", 3);
		return;
	}
	if (sqlite3_prepare_v2(db, "SELECT key, type, value FROM json_each(?1)", -1, &q, NULL) !=
	    SQLITE_OK)
		return;
	sqlite3_bind_text(q, 1, json, -1, SQLITE_TRANSIENT);
	while (sqlite3_step(q) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(q, 0);
		const char *type = (const char *)sqlite3_column_text(q, 1);
		const char *val = (const char *)sqlite3_column_text(q, 2);
		if (!first)
			sb_add(b, object ? ", " : ",", object ? 2 : 1);
		first = false;
		if (object)
			sb_printf(b, "%s -> ", key ? key : "?");
		old_value(db, type ? type : "null", val, b, depth + 1);
	}
	sqlite3_finalize(q);
}

static void old_value(sqlite3 *db, const char *type, const char *text, struct sbuf *b, int depth)
{
	if (!strcmp(type, "null")) {
		sb_add(b, "UNDEFINED", 9);
	} else if (!strcmp(type, "object")) {
		sb_add(b, "(", 1);
		old_members(db, text, true, b, depth);
		sb_add(b, ")", 1);
	} else if (!strcmp(type, "array")) {
		sb_add(b, "[", 1);
		old_members(db, text, false, b, depth);
		sb_add(b, "]", 1);
	} else if (!strcmp(type, "text")) {
		sb_printf(b, "\"%s\"", text ? text : "");
	} else if (!strcmp(type, "true") || !strcmp(type, "false")) {
		sb_printf(b, "%s", type);
	} else {
		sb_printf(b, "%s", text ? text : "?");
	}
}

static char *old_render(sqlite3 *db, const char *json)
{
	struct sbuf b = { 0 };
	sqlite3_stmt *q;
	bool first = true;

	if (sqlite3_prepare_v2(db, "SELECT key, type, value FROM json_each(?1) WHERE json_valid(?1)"
				   " AND json_type(?1) = 'object'", -1, &q, NULL) != SQLITE_OK)
		return strdup("");
	sqlite3_bind_text(q, 1, json, -1, SQLITE_TRANSIENT);
	while (sqlite3_step(q) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(q, 0);
		const char *type = (const char *)sqlite3_column_text(q, 1);
		const char *val = (const char *)sqlite3_column_text(q, 2);
		if (!first)
			sb_add(&b, ", ", 2);
		first = false;
		sb_printf(&b, "%s = ", key ? key : "?");
		old_value(db, type ? type : "null", val, &b, 0);
	}
	sqlite3_finalize(q);
	return sb_take(&b);
}

/* render_metrics_plain(json) is what sqlite rendered. */
static void same_rendering(sqlite3 *db, const char *json)
{
	char *now = render_metrics_plain(json), *then = old_render(db, json);

	assert_non_null(now);
	if (strcmp(now, then))
		fail_msg("%s\n  now:  %s\n  then: %s", json, now, then);
	free(now);
	free(then);
}

static void render_as_sqlite_did(void **state)
{
	static const char *const cases[] = {
		"{}", "{\"a\":null}", "{\"time\":[12990,1,1],\"size\":8192,\"hit\":true,\"miss\":false}",
		("{\"x\":0.1,\"y\":2.5,\"z\":1.0,\"w\":-0.0,\"v\":1e20,\"u\":1.5e-7,\"t\":1E5,"
		"\"s\":0.30000000000000004,\"r\":123456.789,\"q\":-12,\"p\":-0,\"o\":1e300,"
		"\"n\":9223372036854775807,\"m\":9223372036854775808,\"l\":-9223372036854775808,"
		"\"k\":123456789012345678901,\"j\":3.14159265358979323846,\"i\":-2.5e-300}"),
		"{\"s\":\"caf\\u00e9 \\\"q\\\" \\n\",\"e\":\"\",\"nul\":\"a\\u0000b\"}",
		"{\"hist\":{\"3\":2,\"5\":1},\"arr\":[],\"obj\":{},\"mix\":[1,\"a\",null,[true],{\"k\":false}]}",
		("{\"d\":[[[[[[[[[[[1]]]]]]]]]]],\"o\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":"
		"{\"a\":{\"a\":1}}}}}}}}}}"),
		"{ \"sp\" : [ 1 , 2 ] , \"key with space\" : 1 }",
		"{\"{mean v : V : v.x}\":2.5,\"Limit\":2}",
		"[1,2]", "\"text\"", "12", "null", "not json", "{\"a\":1", "",
	};
	char pattern[4096], *dir;
	sqlite3 *db;
	glob_t g;
	int lines = 0;

	(void)state;
	assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		same_rendering(db, cases[i]);
	{
		char *none = render_metrics(NULL);
		assert_string_equal(none, "");
		free(none);
	}
	/* every metrics object and witness of the language tests */
	snprintf(pattern, sizeof pattern, "%s", __FILE__);
	dir = dirname(pattern);
	memmove(pattern, dir, strlen(dir) + 1);
	strncat(pattern, "/../lang/*.expected", sizeof pattern - strlen(pattern) - 1);
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		FILE *f = fopen(g.gl_pathv[i], "r");
		char line[8192];
		assert_non_null(f);
		while (fgets(line, sizeof line, f)) {
			struct checker_report r;
			size_t n = strcspn(line, "\n");
			if (line[0] != '{' || report_parse(line, n, &r) != 0)
				continue;
			if (r.metrics) {
				same_rendering(db, r.metrics);
				lines++;
			}
			if (r.witness && r.witness_tree->kind == JSON_OBJECT) {
				same_rendering(db, r.witness);
				lines++;
			}
			report_free(&r);
		}
		fclose(f);
	}
	globfree(&g);
	sqlite3_close(db);
	assert_true(lines >= 10);
}

/* Durations (by name) in human units, the rest as PSpec writes it. */
static void render_in_units(void **state)
{
	static const struct { const char *json, *text; } cases[] = {
		{ "{\"time\":[13781143,1,1],\"size\":8192,\"hit\":true}",
		  "time = 13.8 ms (\u00b11 ns), size = 8192, hit = true" },
		{ "{\"time\":[254635,0,0]}", "time = 254.6 \u00b5s" },
		{ "{\"latency\":2151720000}", "latency = 2.15 s" },
		{ "{\"read_ns\":[8,1.5,2.5]}", "read_ns = 8 ns (+1.50 ns -2.50 ns)" },
		{ "{\"msTime\":1500}", "msTime = 1500" },   /* its unit is not known */
		{ "{\"wait\":999999}", "wait = 1.00 ms" },
		{ "{\"time\":null,\"Time\":[1,2]}", "time = UNDEFINED, Time = [1,2]" },
		{ "{\"timeout\":13781143,\"t\":12}", "timeout = 13781143, t = 12" },
	};
	char s[48];

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *text = render_metrics(cases[i].json);
		assert_non_null(text);
		if (strcmp(text, cases[i].text))
			fail_msg("%s\n  got:  %s\n  want: %s", cases[i].json, text, cases[i].text);
		free(text);
	}
	{
		char *u = metrics_units_json("{\"time\":[1,1,1],\"size\":2,\"io_ns\":3}");
		assert_string_equal(u, "{\"time\":\"ns\",\"io_ns\":\"ns\"}");
		free(u);
		u = metrics_units_json(NULL);
		assert_string_equal(u, "{}");
		free(u);
		u = metrics_units_json("[1]");
		assert_string_equal(u, "{}");
		free(u);
	}
	assert_string_equal(fmt_ns(254635, true, s, sizeof s), "+254.6 \u00b5s");
	assert_string_equal(fmt_ns(-1850000, true, s, sizeof s), "-1.85 ms");
	assert_string_equal(fmt_ns(0, true, s, sizeof s), "0 ns");
	assert_true(metric_is_duration("time") && metric_is_duration("Elapsed") &&
		    metric_is_duration("io_ns") && metric_is_duration("meanTime") &&
		    metric_is_duration("meantime") && metric_is_duration("stime") &&
		    !metric_is_duration("msTime") && !metric_is_duration("sec_time") &&
		    !metric_is_duration("size") && !metric_is_duration("_ns"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(scalars),
		cmocka_unit_test(big_integers),
		cmocka_unit_test(nesting),
		cmocka_unit_test(escapes),
		cmocka_unit_test(depth_limit),
		cmocka_unit_test(errors_with_offsets),
		cmocka_unit_test(garbage),
		cmocka_unit_test(field_readings),
		cmocka_unit_test(reports_interval_event),
		cmocka_unit_test(reports_verdicts),
		cmocka_unit_test(reports_print_and_not),
		cmocka_unit_test(render_as_sqlite_did),
		cmocka_unit_test(render_in_units),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
