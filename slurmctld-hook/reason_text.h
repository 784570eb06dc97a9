/*
 * reason_text.h - the rule for text Lachesis appends to a job's
 * AdminComment, applied in C whatever the core returned.
 *
 * An AdminComment carries Lachesis's markers ("[lachesis:sized ...]"),
 * which the Synergy fallback reads back and acts on as SlurmUser. Reasons
 * quote text a user chose (job name, comment, model key, partition), so
 * that text must never be able to spell a marker, nor put control
 * characters in front of an admin reading `scontrol show job`. The core
 * already drops them (internal/util/reasontext); this is the same rule at
 * the point where the comment is written: every '[' and ']' goes, except
 * those of one marker that ends the reason, and so does every control
 * character (C0, DEL and UTF-8-encoded C1).
 *
 * Header-only and free of Slurm so that a plain C test
 * (reason_text_test.c, run by cgo/reason_text_test.go) can check it.
 */
#ifndef LACHESIS_REASON_TEXT_H
#define LACHESIS_REASON_TEXT_H

#include <stddef.h>
#include <string.h>

#define LACHESIS_REASON_MARKER "[lachesis:"

/* Where the trailing marker of src (length n) starts, or n when src does
 * not end with one: the last "[lachesis:" whose text holds no other
 * bracket and no control byte up to the ']' that ends src. */
static inline size_t lachesis_reason_tail(const char *src, size_t n)
{
	const char *at = NULL, *p = src;

	while ((p = strstr(p, LACHESIS_REASON_MARKER))) {
		at = p;
		p++;
	}
	if (!at || n < 2 || src[n - 1] != ']')
		return n;
	for (p = at + 1; p < src + n - 1; p++) {
		unsigned char c = (unsigned char) *p;
		if (c == '[' || c == ']' || c < 0x20 || c == 0x7f || c >= 0x80)
			return n;
	}
	return (size_t) (at - src);
}

/* Copies src into dst (cap bytes, cap > 0, always NUL-terminated, cut
 * when full) by the rule above; keep_marker says the reason is one that
 * ends with Lachesis's marker (a sizing), else no bracket is kept.
 * Returns dst. */
static inline char *lachesis_reason_clean(char *dst, size_t cap,
					  const char *src, int keep_marker)
{
	size_t n = strlen(src), o = 0;
	size_t tail = keep_marker ? lachesis_reason_tail(src, n) : n;

	for (size_t i = 0; i < n && o + 1 < cap; i++) {
		unsigned char c = (unsigned char) src[i];
		if (i < tail) {
			if (c == '[' || c == ']' || c < 0x20 || c == 0x7f)
				continue;
			/* U+0080..U+009F, the C1 controls, are C2 80..C2 9F */
			if (c == 0xc2 && i + 1 < n &&
			    (unsigned char) src[i + 1] >= 0x80 &&
			    (unsigned char) src[i + 1] <= 0x9f) {
				i++;
				continue;
			}
		}
		dst[o++] = (char) c;
	}
	dst[o] = '\0';
	return dst;
}

#endif
