/* logread_api.c — the public face of the log readers (pspec.h, "reading a
 * log"): pspec_log_* over logread.h, events and gaps only. */
#include <stdlib.h>
#include <string.h>

#include "logread.h"
#include "pspec/pspec.h"
#include "util.h"

struct pspec_log {
    log_reader *r;
};

pspec_log *pspec_log_open(int fd, const char *logname, pspec_warn_fn warn, void *ctx, char **errmsg)
{
    *errmsg = NULL;
    log_reader *r = log_reader_open(fd, false, logname, warn, ctx, errmsg);
    if (!r)
        return NULL;
    pspec_log *l = ps_malloc(sizeof *l);
    l->r = r;
    return l;
}

void pspec_log_free(pspec_log *l)
{
    if (!l)
        return;
    log_reader_free(l->r);
    free(l);
}

double pspec_log_tick_ns(const pspec_log *l)
{
    return log_reader_header(l->r)->tick_ns;
}

const char *pspec_log_header(const pspec_log *l, const char *key)
{
    const log_header *h = log_reader_header(l->r);
    for (size_t i = 0; i < h->nfields; i++)
        if (strcmp(h->fields[i].key, key) == 0)
            return h->fields[i].value;
    return NULL;
}

int pspec_log_next(pspec_log *l, pspec_log_record *rec, char **errmsg)
{
    *errmsg = NULL;
    log_record lr;
    int rc = log_reader_next(l->r, &lr, errmsg);
    if (rc != 1)
        return rc;
    memset(rec, 0, sizeof *rec);
    rec->pos = lr.pos;
    if (lr.kind == LOG_REC_GAP) {
        rec->kind = PSPEC_LOG_GAP;
        rec->gap = lr.gap;
        return 1;
    }
    rec->kind = PSPEC_LOG_EVENT;
    rec->name = lr.name;
    rec->values = lr.values;
    rec->nvalues = lr.nvalues;
    rec->ts = lr.ts;
    rec->thread = lr.thread;
    return 1;
}
