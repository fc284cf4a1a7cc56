/* Unit tests for the HTML writer (daemons/telemonitor/html.c), which the
 * dashboard renders every stored text through: markup characters become
 * entities (in text and in quoted attributes), plain text and UTF-8 pass
 * unchanged, NULL adds nothing, cells carry their class escaped too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/html.c"
#include "../../daemons/telemonitor/json.c"
#include "../../daemons/telemonitor/report.c"
#include "../../daemons/telemonitor/text.c"

/* html_text(s) as a string (static buffer). */
static const char *esc(const char *s)
{
	static char out[512];
	struct sbuf b = { 0 };

	html_text(&b, s);
	snprintf(out, sizeof out, "%s", b.s ? b.s : "");
	sb_free(&b);
	return out;
}

static void markup_becomes_entities(void **state)
{
	(void)state;
	assert_string_equal(esc("<script>alert('x')</script>"),
			    "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
	assert_string_equal(esc("a & b \"c\""), "a &amp; b &quot;c&quot;");
	assert_string_equal(esc("&amp;"), "&amp;amp;");
	assert_string_equal(esc("\"><img src=x onerror=1>"),
			    "&quot;&gt;&lt;img src=x onerror=1&gt;");
}

static void plain_text_unchanged(void **state)
{
	(void)state;
	assert_string_equal(esc("1-day stats"), "1-day stats");
	assert_string_equal(esc("applyOps = (3 -> 2)"), "applyOps = (3 -&gt; 2)");
	assert_string_equal(esc("caf\xc3\xa9 \xe2\x96\x88"), "caf\xc3\xa9 \xe2\x96\x88");
	assert_string_equal(esc(""), "");
	assert_string_equal(esc("<"), "&lt;");
	assert_string_equal(esc("x>"), "x&gt;");
}

static void null_adds_nothing(void **state)
{
	struct sbuf b = { 0 };

	(void)state;
	sb_printf(&b, "a");
	html_text(&b, NULL);
	assert_string_equal(b.s, "a");
	sb_free(&b);
}

static void cells(void **state)
{
	struct sbuf b = { 0 };

	(void)state;
	html_cell(&b, NULL, "<b>");
	html_cell(&b, "a\"b", "x");
	html_cell_num(&b, -42);
	assert_string_equal(b.s, "<td>&lt;b&gt;</td><td class=\"a&quot;b\">x</td>"
			    "<td class=\"num\">-42</td>");
	sb_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(markup_becomes_entities),
		cmocka_unit_test(plain_text_unchanged),
		cmocka_unit_test(null_adds_nothing),
		cmocka_unit_test(cells),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
