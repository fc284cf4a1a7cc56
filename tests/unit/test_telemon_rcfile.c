/* Unit tests for the telemonitor's configuration parser
 * (daemons/telemonitor/rcfile.c): the grammar of the report's appendix
 * C.1, defaults and last-value-wins, the new properties, and one case per
 * kind of error, each naming the line and the property.
 *
 * The telemonitor is a program, not a library, so its modules are compiled
 * into this test directly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../daemons/telemonitor/rcfile.c"
#include "../../daemons/telemonitor/window.c"

static struct rc_config *parse_ok(const char *text)
{
	struct rc_config *c = NULL;
	char err[600] = "";
	int r = rc_parse(text, strlen(text), "rc", "/nonexistent", &c, err, sizeof err);

	if (r != 0)
		fail_msg("unexpected error: %s", err);
	return c;
}

/* Parse `text`, expect an error containing every string in `want`. */
static void parse_bad(const char *text, const char *want1, const char *want2)
{
	struct rc_config *c = NULL;
	char err[600] = "";
	int r = rc_parse(text, strlen(text), "rc", "/nonexistent", &c, err, sizeof err);

	if (r == 0)
		fail_msg("accepted: %s", text);
	assert_null(c);
	if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
		fail_msg("message '%s' lacks '%s' / '%s'", err, want1, want2 ? want2 : "");
}

static void original_example(void **state)
{
	/* the grammar of appendix C.1, with comments and blank lines */
	struct rc_config *c = parse_ok(
		"; defaults first\n"
		"(defaults (machine \"\") (tool \"cat >/dev/null\") (block FALSE))\n"
		"\n"
		"(class (prog \"lectern\") (tool \"cat >/tmp/log.$M_MACHINE.$M_PID\")\n"
		"       (auto TRUE))   ; trailing comment\n"
		"(class (prog \"argohear\") (pid \"1234\"))\n");
	assert_int_equal(c->nclasses, 2);
	assert_string_equal(rc_text(c, &c->classes[0], RC_PROG), "lectern");
	assert_string_equal(rc_text(c, &c->classes[0], RC_TOOL), "cat >/tmp/log.$M_MACHINE.$M_PID");
	/* text props default to the defaults' value or "" */
	assert_string_equal(rc_text(c, &c->classes[1], RC_TOOL), "cat >/dev/null");
	assert_string_equal(rc_text(c, &c->classes[1], RC_MACHINE), "");
	assert_string_equal(rc_text(c, &c->classes[1], RC_SPEC), "");
	/* booleans default to the default, else TRUE */
	assert_false(rc_flag(c, &c->classes[1], RC_BLOCK));
	assert_true(rc_flag(c, &c->classes[1], RC_AUTO));
	assert_int_equal(c->classes[0].line, 4);
	rc_free(c);
}

static void no_defaults_and_last_wins(void **state)
{
	struct rc_config *c = parse_ok("(class (prog \"a\") (tool \"x\") (tool \"y\") (block FALSE) "
				       "(block TRUE))");
	assert_false(c->has_defaults);
	assert_string_equal(rc_text(c, &c->classes[0], RC_TOOL), "y");
	assert_true(rc_flag(c, &c->classes[0], RC_BLOCK));
	assert_true(rc_flag(c, &c->classes[0], RC_AUTO));
	rc_free(c);
	c = parse_ok("");
	assert_int_equal(c->nclasses, 0);
	rc_free(c);
	/* no tool and no spec anywhere: empty text, still a class */
	c = parse_ok("(class (prog \"a\"))");
	assert_int_equal(c->nclasses, 1);
	assert_string_equal(rc_text(c, &c->classes[0], RC_TOOL), "");
	rc_free(c);
}

static void new_properties(void **state)
{
	char path[] = "/tmp/telemon-rc-XXXXXX";
	int fd = mkstemp(path);
	char text[2000];
	struct rc_config *c;

	assert_true(fd >= 0);
	close(fd);
	snprintf(text, sizeof text,
		 "(defaults (smtp \"smtp://127.0.0.1:2525\") (from \"cmon@example.org\")\n"
		 "          (mail \"ops@example.org\") (mailgroup \"5 min\") (window \"30 sec\"))\n"
		 "(class (prog \"fs*\") (spec \"%s\") (mail \"a@b.c, d@e.f\") "
		 "(window \"500 after 50\"))\n", path);
	c = parse_ok(text);
	assert_string_equal(rc_text(c, NULL, RC_SMTP), "smtp://127.0.0.1:2525");
	assert_string_equal(rc_text(c, &c->classes[0], RC_MAIL), "a@b.c, d@e.f");
	assert_string_equal(rc_text(c, &c->classes[0], RC_WINDOW), "500 after 50");
	assert_string_equal(rc_text(c, &c->classes[0], RC_MAILGROUP), "5 min");
	assert_string_equal(rc_text(c, &c->classes[0], RC_SPEC), path);
	assert_string_equal(rc_text(c, NULL, RC_STORE_BACKLOG), "");
	assert_string_equal(rc_text(c, NULL, RC_HTTP), "");
	rc_free(c);
	unlink(path);
	/* http: an address, in the defaults only */
	c = parse_ok("(defaults (http \"127.0.0.1:7363\"))\n");
	assert_string_equal(rc_text(c, NULL, RC_HTTP), "127.0.0.1:7363");
	rc_free(c);
	/* store-backlog: a bare number or text */
	c = parse_ok("(defaults (store-backlog 250))");
	assert_string_equal(rc_text(c, NULL, RC_STORE_BACKLOG), "250");
	rc_free(c);
	c = parse_ok("(defaults (store-backlog \"10000000\"))");
	assert_string_equal(rc_text(c, NULL, RC_STORE_BACKLOG), "10000000");
	rc_free(c);
	/* max-sessions: likewise */
	c = parse_ok("(defaults (max-sessions 300))");
	assert_string_equal(rc_text(c, NULL, RC_MAX_SESSIONS), "300");
	rc_free(c);
	c = parse_ok("(defaults (max-sessions \"2000\"))");
	assert_string_equal(rc_text(c, NULL, RC_MAX_SESSIONS), "2000");
	rc_free(c);
}

/* notify-reports is FALSE unless set (block and auto stay TRUE); a class's
 * value wins over the defaults'. retention is a duration in defaults. */
static void notify_reports_and_retention(void **state)
{
	struct rc_config *c = parse_ok("(class (prog \"a\") (tool \"x\"))");

	assert_false(rc_flag(c, &c->classes[0], RC_NOTIFY_REPORTS));
	assert_true(rc_flag(c, &c->classes[0], RC_BLOCK));
	assert_string_equal(rc_text(c, NULL, RC_RETENTION), "");
	rc_free(c);
	c = parse_ok("(defaults (notify-reports TRUE) (retention \"30 days\"))\n"
		     "(class (prog \"a\") (tool \"x\"))\n"
		     "(class (prog \"b\") (tool \"x\") (notify-reports FALSE))");
	assert_true(rc_flag(c, &c->classes[0], RC_NOTIFY_REPORTS));
	assert_false(rc_flag(c, &c->classes[1], RC_NOTIFY_REPORTS));
	assert_string_equal(rc_text(c, NULL, RC_RETENTION), "30 days");
	rc_free(c);
	c = parse_ok("(defaults (retention \"2 h\"))");
	rc_free(c);
	parse_bad("(defaults (retention \"soon\"))", "rc:1:",
		  "retention: \"soon\" is not a duration such as \"30 days\"");
	parse_bad("(defaults (retention \"10 min\"))", "rc:1:", "retention: \"10 min\"");
	parse_bad("(defaults (retention \"200000 days\"))", "rc:1:", "retention: \"200000 days\"");
	parse_bad("(defaults (retention \"500\"))", "rc:1:", "retention: \"500\"");
	parse_bad("(class (prog \"a\") (tool \"x\") (retention \"30 days\"))", "rc:1:",
		  "retention: only allowed in (defaults");
	parse_bad("(class (prog \"a\") (tool \"x\") (notify-reports \"yes\"))", "rc:1:",
		  "notify-reports: expected TRUE or FALSE");
}

/* alertmanager: an http(s) base URL, in defaults or a class (which wins). */
static void alertmanager_url(void **state)
{
	struct rc_config *c = parse_ok("(defaults (alertmanager \"http://127.0.0.1:9093\"))\n"
				       "(class (prog \"a\") (tool \"x\"))\n"
				       "(class (prog \"b\") (tool \"x\")"
				       " (alertmanager \"https://am.example.org/\"))");

	assert_string_equal(rc_text(c, &c->classes[0], RC_ALERTMANAGER), "http://127.0.0.1:9093");
	assert_string_equal(rc_text(c, &c->classes[1], RC_ALERTMANAGER), "https://am.example.org/");
	rc_free(c);
	parse_bad("(defaults (alertmanager \"127.0.0.1:9093\"))", "rc:1:",
		  "alertmanager: \"127.0.0.1:9093\" is not an http:// or https:// URL");
	parse_bad("(defaults (alertmanager \"ftp://h\"))", "rc:1:", "is not an http://");
	parse_bad("(class (prog \"a\") (tool \"x\") (alertmanager \"http://h:1/x y\"))", "rc:1:",
		  "alertmanager: an Alertmanager URL cannot contain spaces");
	parse_bad("(defaults (alertmanager \"http://h:1/?a=b\"))", "rc:1:", "cannot contain");
}

static void text_escapes(void **state)
{
	struct rc_config *c = parse_ok("(class (prog \"p\") (tool \"echo \\\"hi\\\" \\\\ there\"))");
	assert_string_equal(rc_text(c, &c->classes[0], RC_TOOL), "echo \"hi\" \\ there");
	rc_free(c);
}

/* One fixture per kind of error: the message names the line and property. */
static void errors(void **state)
{
	parse_bad("(class (prog \"a\") (tool \"x\"))\n(defaults (tool \"y\"))", "rc:2:",
		  "defaults: must come before");
	parse_bad("(defaults)\n(defaults)", "rc:2:", "defaults: given twice (first on line 1)");
	parse_bad("(class\n (prog \"a\")\n (colour \"red\"))", "rc:3:", "colour: unknown property");
	/* the message names every property there is, from the table */
	parse_bad("(defaults (colour \"red\"))", "allow-unbounded; in defaults also smtp",
		  "max-sessions retention http http-token-file store)");
	parse_bad("(class (prog \"a\") (tool \"x\")\n  (block \"yes\"))", "rc:2:",
		  "block: expected TRUE or FALSE");
	parse_bad("(class (prog \"a\") (tool \"x\") (block true))", "rc:1:",
		  "block: expected TRUE or FALSE, found 'true'");
	parse_bad("(class (prog lectern) (tool \"x\"))", "rc:1:",
		  "prog: expected a \"text\" value");
	parse_bad("(class (prog \"a\") (tool \"x\"))\n(smtp \"smtp://h\")", "rc:2:",
		  "expected 'defaults' or 'class' after '(', found 'smtp'");
	parse_bad("(class (prog \"a\") (tool \"x\"))\n\"stray\"", "rc:2:",
		  "expected '(' to start");
	parse_bad("(class (prog \"a\") (tool \"x\") (smtp \"smtp://h\"))", "rc:1:",
		  "smtp: only allowed in (defaults");
	parse_bad("(defaults (smtp \"http://h\"))", "rc:1:", "smtp: \"http://h\" is not an smtp://");
	parse_bad("(class (prog \"a\") (tool \"x\") (http \"127.0.0.1:1\"))", "rc:1:",
		  "http: only allowed in (defaults");
	parse_bad("(defaults (http \"no such:place\"))", "rc:1:",
		  "http: \"no such:place\" is not an address");
	parse_bad("(defaults (store-backlog 0))", "rc:1:",
		  "store-backlog: \"0\" is not a number of failures from 1 to 10000000");
	parse_bad("(defaults (store-backlog \"10000001\"))", "rc:1:", "store-backlog: \"10000001\"");
	parse_bad("(defaults (store-backlog \"-5\"))", "rc:1:", "store-backlog: \"-5\"");
	parse_bad("(defaults (store-backlog lots))", "rc:1:", "store-backlog: \"lots\"");
	parse_bad("(class (prog \"a\") (tool \"x\") (store-backlog 5))", "rc:1:",
		  "store-backlog: only allowed in (defaults");
	parse_bad("(defaults (max-sessions 0))", "rc:1:",
		  "max-sessions: \"0\" is not a number of instances from 1 to 2000");
	parse_bad("(defaults (max-sessions many))", "rc:1:", "max-sessions: \"many\"");
	parse_bad("(class (prog \"a\") (tool \"x\") (max-sessions 5))", "rc:1:",
		  "max-sessions: only allowed in (defaults");
	parse_bad("(class (prog \"a/../b\") (tool \"x\"))", "rc:1:", "prog: \"a/../b\" is not a name");
	parse_bad("(class (prog \"a\") (pid \"12a\") (tool \"x\"))", "rc:1:",
		  "pid: \"12a\" is not a pid pattern");
	parse_bad("(class (prog \"a\") (tool \"x\") (mail \"root\"))", "rc:1:",
		  "mail: \"root\" is not a mail address");
	parse_bad("(class (prog \"a\") (tool \"x\") (mail \"a@b>; RCPT TO:<c@d\"))", "rc:1:",
		  "mail:");
	parse_bad("(class (prog \"a\") (tool \"x\") (window \"lots\"))", "rc:1:",
		  "window: \"lots\" is not a window");
	parse_bad("(class (prog \"a\") (tool \"x\") (window \"0\"))", "rc:1:", "window:");
	parse_bad("(class (prog \"a\") (tool \"x\") (mailgroup \"soon\"))", "rc:1:",
		  "mailgroup: \"soon\" is not a duration");
	parse_bad("(class (prog \"a\") (spec \"/no/such/file.pspec\"))", "rc:1:",
		  "spec: cannot read /no/such/file.pspec");
	parse_bad("(class (prog \"a\") (spec \"rel.pspec\"))", "rc:1:",
		  "spec: cannot read /nonexistent/rel.pspec");
	parse_bad("(class (prog \"a\") (tool \"x\"))\n(class (prog \"a\") (tool \"y\"))", "rc:2:",
		  "prog: the same prog, machine and pid as the class on line 1");
	parse_bad("(class (prog \"*\") (tool \"x\"))\n(class (tool \"y\"))", "rc:2:",
		  "the same prog");
	parse_bad("(class (tool \"x\")\n (prog \"abc))\n", "rc:2:", "unterminated text");
	parse_bad("(class (prog \"a\") (tool \"x\")\n\n", "rc:1:", "class: no ')' closes it");
	parse_bad("(class (prog \"a\") (tool \"x\") 12)", "rc:1:", "class: expected '(' or ')', "
		  "found '12'");
	parse_bad("(class (prog \"a\" \"b\"))", "rc:1:", "prog: expected ')' after the value");
	parse_bad("(klass (prog \"a\"))", "rc:1:", "expected 'defaults' or 'class'");
	parse_bad("(class (prog \"a\") (tool \"x\")) }", "rc:1:", "unexpected character '}'");
	parse_bad("(class (prog \"a\") (tool \"bad \\q escape\"))", "rc:1:", "unknown escape");
	parse_bad("(class (Prog \"a\") (tool \"x\"))", "rc:1:", "Prog: unknown property");
	parse_bad("(class (prog \"a\") (tool \"x\"))\n\n\n  ((", "rc:4:", "expected 'defaults' or");
}

static void limits(void **state)
{
	size_t n = RC_TEXT_MAX + 100;
	char *text = malloc(n + 64);
	struct rc_config *c = NULL;
	char err[600];

	strcpy(text, "(class (prog \"a\") (tool \"");
	memset(text + strlen(text), 'x', n);
	strcpy(text + 25 + n, "\"))");
	parse_bad(text, "rc:1:", "longer than");
	free(text);
	assert_int_equal(rc_parse("(class)\0", 8, "rc", NULL, &c, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "NUL"));
}

static void props_set_and_format(void **state)
{
	struct rc_config *c = parse_ok("(defaults (tool \"cat\"))\n(class (prog \"p\"))");
	struct rc_class k = { 0 };
	struct rc_config *again;
	char err[300], *text;

	assert_int_equal(rc_props_set(&k.p, "prog", "q*", false, err, sizeof err), 0);
	assert_int_equal(rc_props_set(&k.p, "auto", "no", false, err, sizeof err), 0);
	assert_int_equal(rc_props_set(&k.p, "tool", "echo \"$M_PROG\"", false, err, sizeof err), 0);
	assert_int_equal(rc_props_set(&k.p, "smtp", "smtp://x", false, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "smtp: only allowed"));
	assert_int_equal(rc_props_set(&k.p, "block", "maybe", false, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "block: expected TRUE or FALSE"));
	assert_int_equal(rc_props_set(&k.p, "nope", "1", false, err, sizeof err), -EINVAL);
	assert_int_equal(rc_check_class(c, &k, err, sizeof err), 0);
	assert_true(rc_add_class(c, &k) == 1);
	rc_props_clear(&k.p);
	assert_false(rc_flag(c, &c->classes[1], RC_AUTO));

	/* the canonical form reads back to the same configuration */
	text = rc_format(c);
	assert_non_null(text);
	assert_int_equal(rc_parse(text, strlen(text), "saved", NULL, &again, err, sizeof err), 0);
	assert_int_equal(again->nclasses, 2);
	assert_string_equal(rc_text(again, &again->classes[1], RC_TOOL), "echo \"$M_PROG\"");
	assert_string_equal(rc_text(again, &again->classes[0], RC_TOOL), "cat");
	assert_false(rc_flag(again, &again->classes[1], RC_AUTO));
	free(text);
	rc_free(again);

	rc_remove_class(c, 0);
	assert_int_equal(c->nclasses, 1);
	assert_string_equal(rc_text(c, &c->classes[0], RC_PROG), "q*");
	rc_free(c);
}

/* classes.rc: the live changes to a telemonrc, saved and merged back. */
static void overlay_save_and_load(void **state)
{
	char dir[] = "/tmp/telemon-rcdir-XXXXXX", path[300], ov_path[300], err[300];
	const char *rc = "; the admin's comment\n(class (prog \"a\") (tool \"cat\"))\n"
			 "(class (prog \"b\") (tool \"cat\"))\n(class (prog \"c\") (tool \"cat\"))\n";
	struct rc_config *base, *live, *again, *ov;
	struct rc_class k = { 0 };
	char *text;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/telemonrc", dir);
	snprintf(ov_path, sizeof ov_path, "%s/classes.rc", dir);
	f = fopen(path, "w");
	fputs(rc, f);
	fclose(f);
	assert_int_equal(rc_load(path, &base, err, sizeof err), 0);
	live = rc_clone(base);
	rc_remove_class(live, 0);                                      /* rm a */
	assert_int_equal(rc_props_set(&live->classes[0].p, "auto", "FALSE", false, err,
				      sizeof err), 0);                 /* set b */
	assert_int_equal(rc_props_set(&k.p, "prog", "d", false, err, sizeof err), 0);
	assert_int_equal(rc_add_class(live, &k), 2);                   /* add d */
	rc_props_clear(&k.p);
	text = rc_overlay_format(base, live);
	assert_non_null(strstr(text, "(removed\n  (prog \"a\")"));
	assert_non_null(strstr(text, "(auto FALSE)"));
	assert_null(strstr(text, "\"c\""));                            /* unchanged: not written */
	free(text);
	assert_int_equal(rc_overlay_save(ov_path, base, live, err, sizeof err), 0);

	/* the telemonrc file is as it was; merging classes.rc gives the live classes */
	rc_free(base);
	assert_int_equal(rc_load(path, &base, err, sizeof err), 0);
	assert_int_equal(base->nclasses, 3);
	assert_int_equal(rc_overlay_load(ov_path, &ov, err, sizeof err), 0);
	again = rc_clone(base);
	assert_int_equal(rc_overlay_apply(again, ov, err, sizeof err), 0);
	assert_int_equal(again->nclasses, 3);
	assert_string_equal(rc_text(again, &again->classes[0], RC_PROG), "b");
	assert_false(rc_flag(again, &again->classes[0], RC_AUTO));
	assert_string_equal(rc_text(again, &again->classes[1], RC_PROG), "c");
	assert_string_equal(rc_text(again, &again->classes[2], RC_PROG), "d");
	rc_free(ov);

	/* a (removed ...) has only the key; classes.rc has no defaults */
	assert_int_equal(rc_parse("(removed (prog \"a\"))", 20, "x", NULL, &ov, err, sizeof err),
			 -EINVAL);
	f = fopen(ov_path, "w");
	fputs("(removed (prog \"a\") (tool \"cat\"))\n", f);
	fclose(f);
	assert_int_equal(rc_overlay_load(ov_path, &ov, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "tool: a (removed ...) entry has only prog, machine and pid"));
	f = fopen(ov_path, "w");
	fputs("(defaults (tool \"cat\"))\n", f);
	fclose(f);
	assert_int_equal(rc_overlay_load(ov_path, &ov, err, sizeof err), -EINVAL);
	rc_free(base);
	rc_free(live);
	rc_free(again);
	unlink(path);
	unlink(ov_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(original_example),
		cmocka_unit_test(no_defaults_and_last_wins),
		cmocka_unit_test(new_properties),
		cmocka_unit_test(notify_reports_and_retention),
		cmocka_unit_test(alertmanager_url),
		cmocka_unit_test(text_escapes),
		cmocka_unit_test(errors),
		cmocka_unit_test(limits),
		cmocka_unit_test(props_set_and_format),
		cmocka_unit_test(overlay_save_and_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
