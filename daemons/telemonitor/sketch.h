/* The checker's duration sketches (pcheck --summaries, docs/man/pcheck.1):
 * relative-error histograms in the manner of DDSketch, mergeable by adding
 * counts. A value x > 0 falls in bucket i = ceil(log(x) / log(gamma)),
 * which stands for 2 gamma^i / (gamma + 1), within (gamma - 1) / (gamma +
 * 1) of every value in it; x < 0 in bucket i of -x, negated; 0 is counted
 * apart. The JSON text is {"gamma":G,"zero":Z,"pos":{"I":C,...},"neg":{...}}.
 * Summaries are merged here (for telemonctl compare) and handed to
 * compare.c as bins. Pure data: no I/O. */
#ifndef TELEMON_SKETCH_H
#define TELEMON_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#include "compare.h"

/* Many sketches merged. */
struct sketch {
	double gamma;             /* the buckets' ratio (0 until the first is added) */
	double zero;              /* values exactly 0 */
	struct sketch_bucket {
		int sign;         /* +1, -1 */
		int32_t idx;      /* bucket index */
		double count;     /* values in it */
	} *b;                     /* buckets added (the same one may come many times) */
	size_t n, cap;            /* used, allocated */
	double count;             /* values in all */
};

/* Add the sketch whose JSON text is `text` (`len` bytes). 0, -EINVAL (not
 * a sketch, or another gamma than the ones added before: left out), -ENOMEM. */
int sketch_add_json(struct sketch *s, const char *text, size_t len);

/* The merged sketch as bins sorted by value (caller frees *out). 0, or
 * -ENOMEM. */
int sketch_bins(struct sketch *s, struct cmp_bin **out, size_t *n);

void sketch_free(struct sketch *s);

#endif
