/* A log window's text at rest. In sqlite a window is stored as one zstd
 * frame of its text (a BLOB in windows.text): windows were most of what a
 * busy telemonitor wrote, log text packs three to four times, and packing
 * costs far less than writing the pages it saves (twice: the WAL, then the
 * checkpoint). A window too small to gain is stored as text, and so are
 * the windows of a PostgreSQL store (the server packs large values
 * itself). Readers take either (wtext_unpack). Pure: no I/O. */
#ifndef TELEMON_WTEXT_H
#define TELEMON_WTEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Texts shorter than this are stored as they are. */
#define WTEXT_MIN 256
/* The zstd level: one of its fast ones. A window of the ramp's log (2 KiB)
 * packs 3.45x in 2.5 us at -2, 4.41x in 5.5 us at 1 (3.50x in 3.05 us at
 * -1): at a failure every 100 reads the pages the better ratio saves are
 * few beside the index pages every commit writes. */
#define WTEXT_LEVEL (-2)

struct wtext;

/* A packer (its zstd context and output buffer, reused). NULL without
 * memory. */
struct wtext *wtext_new(void);
void wtext_free(struct wtext *w);

/* Pack `len` bytes of `text`: 1 with the frame in *out / *outlen (valid
 * until the next call), 0 if it is stored as text (small, or no smaller
 * packed), -ENOMEM. */
int wtext_pack(struct wtext *w, const char *text, size_t len, const void **out, size_t *outlen);

/* True if `p` (n bytes) is a packed window (a zstd frame). */
bool wtext_is_packed(const void *p, size_t n);

/* Unpack a frame into a new NUL-terminated text of at most `max` bytes
 * (*len: its length; free() it). NULL with a message in `err` for a frame
 * that is damaged, or larger than `max`, or without memory. */
char *wtext_unpack(const void *p, size_t n, size_t max, size_t *len, char *err, size_t errlen);

#endif
