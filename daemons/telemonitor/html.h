/* A small HTML writer for the pages the telemonitor renders itself (the
 * dashboard, dashboard.c): every piece of text goes through html_text(),
 * which escapes it, so stored data (program names, assertion labels,
 * metrics) can never become markup. */
#ifndef TELEMON_HTML_H
#define TELEMON_HTML_H

#include "text.h"

/* Append `s` escaped for an element's text or a quoted attribute value
 * (& < > " ' become entities); NULL appends nothing. */
void html_text(struct sbuf *b, const char *s);

/* The same for the `n` bytes at `s` (a line of a log window). */
void html_text_n(struct sbuf *b, const char *s, size_t n);

/* Append "<td>TEXT</td>" (escaped), with class="CLS" when `cls` is not NULL. */
void html_cell(struct sbuf *b, const char *cls, const char *s);

/* Append "<td class=\"num\">N</td>". */
void html_cell_num(struct sbuf *b, long long n);

#endif
