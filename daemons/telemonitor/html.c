/* The HTML writer (see html.h). */
#include <string.h>

#include "html.h"

void html_text(struct sbuf *b, const char *s)
{
	if (s)
		html_text_n(b, s, strlen(s));
}

void html_text_n(struct sbuf *b, const char *s, size_t n)
{
	const char *run = s, *end = s + n;

	for (; s < end; s++) {
		const char *ent;
		switch (*s) {
		case '&': ent = "&amp;"; break;
		case '<': ent = "&lt;"; break;
		case '>': ent = "&gt;"; break;
		case '"': ent = "&quot;"; break;
		case '\'': ent = "&#39;"; break;
		default: continue;
		}
		sb_add(b, run, (size_t)(s - run));
		sb_add(b, ent, strlen(ent));
		run = s + 1;
	}
	sb_add(b, run, (size_t)(s - run));
}

void html_cell(struct sbuf *b, const char *cls, const char *s)
{
	if (cls) {
		sb_printf(b, "<td class=\"");
		html_text(b, cls);
		sb_printf(b, "\">");
	} else {
		sb_printf(b, "<td>");
	}
	html_text(b, s);
	sb_printf(b, "</td>");
}

void html_cell_num(struct sbuf *b, long long n)
{
	sb_printf(b, "<td class=\"num\">%lld</td>", n);
}
