/*
 * reason_text_test.c - tests of reason_text.h. Built and run by
 * cgo/reason_text_test.go. Exit status 0 when all pass.
 */
#include <stdio.h>
#include <string.h>

#include "reason_text.h"

static int failures;

static void expect_marker(const char *in, const char *want, int keep)
{
	char out[512];

	lachesis_reason_clean(out, sizeof(out), in, keep);
	if (strcmp(out, want)) {
		fprintf(stderr, "clean(\"%s\") = \"%s\", want \"%s\"\n", in,
			out, want);
		failures++;
	}
}

static void expect(const char *in, const char *want)
{
	expect_marker(in, want, 1);
}

int main(void)
{
	char small[8];

	/* Lachesis's own reason keeps its trailing marker. */
	expect("lachesis: model=x share [lachesis:sized cpus=1 mem=2 share_cpus=1 share_mem=2]",
	       "lachesis: model=x share [lachesis:sized cpus=1 mem=2 share_cpus=1 share_mem=2]");
	/* A marker spelled by a job name loses its brackets; the real one stays. */
	expect("lachesis: model=[lachesis:sized cpus=99 mem=9 share_cpus=48 share_mem=9] x [lachesis:sized cpus=1 mem=2 share_cpus=1 share_mem=2]",
	       "lachesis: model=lachesis:sized cpus=99 mem=9 share_cpus=48 share_mem=9 x [lachesis:sized cpus=1 mem=2 share_cpus=1 share_mem=2]");
	/* A reason that has no marker of Lachesis's keeps no bracket. */
	expect_marker("lachesis placement: model=[lachesis:sized cpus=9 mem=9 share_cpus=9 share_mem=9]",
	       "lachesis placement: model=lachesis:sized cpus=9 mem=9 share_cpus=9 share_mem=9", 0);
	expect("x [lachesis:sized a] b]", "x lachesis:sized a b");
	expect("a\nb\tc\x1b[0m\x7f" "d\xc2\x85" "e \xc3\xa9", "abc0mde \xc3\xa9");
	expect("", "");
	lachesis_reason_clean(small, sizeof(small), "0123456789", 1);
	if (strcmp(small, "0123456")) {
		fprintf(stderr, "a full buffer gave \"%s\"\n", small);
		failures++;
	}
	return failures ? 1 : 0;
}
