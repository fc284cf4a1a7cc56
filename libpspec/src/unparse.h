/* unparse.h — an expression back as PSpec text, for witnesses (pcheck
 * --explain): the parts of an assertion that made it false. */
#ifndef PS_UNPARSE_H
#define PS_UNPARSE_H

#include "ast.h"
#include "program.h"
#include "util.h"

/* Longest text one expression is shown with ("..." after it). */
#define PS_UNPARSE_MAX 120

/* The source text of the aggregate that opens at loc (its braces matched),
 * at most PS_UNPARSE_MAX bytes; NULL if it cannot be found. */
char *ps_agg_source(const ps_program *prog, ps_loc loc);

/* `e` as PSpec text (aggregates as they are written in the source; other
 * expressions rebuilt from the tree, every compound operand in
 * parentheses), at most PS_UNPARSE_MAX bytes. */
char *ps_unparse(const ps_program *prog, const ps_expr *e);

#endif
