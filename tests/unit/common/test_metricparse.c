/* Unit tests for src/common/metricparse.h: metric points in training output. */
#include "base/compat.h"
#include "common/metricparse.h"

#include <math.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

#define NONE METRIC_NO_STEP

struct want {
	const char *name;
	int64_t step;
	double value;
};

/* Parses len bytes from an exactly sized heap copy (no NUL after it), so
 * that ASan sees any read past the line. */
static size_t parse_n(struct metric_parser *p, const char *line, size_t len,
		      struct metric_points *out)
{
	char *copy = xmalloc(len ? len : 1);
	size_t n;

	memcpy(copy, line, len);
	n = metric_parse_line(p, copy, len, out);
	free(copy);
	return n;
}

/* Parses line with p and checks it gives exactly the points of want. */
static void expect(struct metric_parser *p, const char *line, const struct want *want, size_t nwant)
{
	struct metric_points pts = METRIC_POINTS_INIT;
	size_t n = parse_n(p, line, strlen(line), &pts);

	if (n != nwant || pts.n != nwant) {
		print_message("line: %s\n", line);
		for (size_t i = 0; i < pts.n; i++)
			print_message("  got %s @%" PRId64 " = %g\n", pts.v[i].name, pts.v[i].step,
				      pts.v[i].value);
	}
	assert_int_equal(n, nwant);
	assert_int_equal(pts.n, nwant);
	for (size_t i = 0; i < nwant; i++) {
		if (strcmp(pts.v[i].name, want[i].name) || pts.v[i].step != want[i].step ||
		    pts.v[i].value != want[i].value)
			print_message("line: %s\npoint %zu: got %s @%" PRId64 " = %.17g, want %s @%" PRId64
				      " = %.17g\n", line, i, pts.v[i].name, pts.v[i].step, pts.v[i].value,
				      want[i].name, want[i].step, want[i].value);
		assert_string_equal(pts.v[i].name, want[i].name);
		assert_int_equal(pts.v[i].step, want[i].step);
		assert_true(pts.v[i].value == want[i].value);
	}
	metric_points_release(&pts);
}

#define EXPECT(p, line, ...)                                                        \
	do {                                                                        \
		const struct want w_[] = { __VA_ARGS__ };                           \
		expect((p), (line), w_, ARRAY_SIZE(w_));                            \
	} while (0)
#define EXPECT_NONE(p, line) expect((p), (line), NULL, 0)

/* ---- @yard ------------------------------------------------------------- */

static void test_yard_basic(void **state)
{
	struct metric_parser p;
	metric_parser_init(&p);
	EXPECT(&p, "@yard {\"step\": 120, \"loss\": 0.31, \"acc\": 0.94}",
	       { "loss", 120, 0.31 }, { "acc", 120, 0.94 });
	/* integers are values too; no step means none */
	EXPECT(&p, "@yard {\"tokens\": 4096}", { "tokens", NONE, 4096 });
	EXPECT(&p, "@yard {\"step\": 0, \"x\": -1.5e-3}", { "x", 0, -1.5e-3 });
	/* a tab, several blanks, trailing bytes after the object, CRLF */
	EXPECT(&p, "@yard\t{\"a\": 1} and then some", { "a", NONE, 1 });
	EXPECT(&p, "@yard   {\"a\": 2}\r", { "a", NONE, 2 });
}

/* Launchers put prefixes before each line: the marker may be anywhere. */
static void test_yard_prefixes(void **state)
{
	struct metric_parser p;
	metric_parser_init(&p);
	EXPECT(&p, "[default0]:@yard {\"step\": 3, \"loss\": 1}", { "loss", 3, 1 });
	EXPECT(&p, "[1,0]<stdout>:@yard {\"step\": 4, \"loss\": 2}", { "loss", 4, 2 });
	EXPECT(&p, "2026-01-01 INFO train: @yard {\"lr\": 0.1}", { "lr", NONE, 0.1 });
	/* the first "@yard" that is followed by an object counts */
	EXPECT(&p, "@yard: see @yard {\"v\": 5}", { "v", NONE, 5 });
}

/* step must be an integer >= 0; otherwise the points have none. */
static void test_yard_step_rules(void **state)
{
	struct metric_parser p;
	metric_parser_init(&p);
	EXPECT(&p, "@yard {\"step\": -1, \"a\": 1}", { "a", NONE, 1 });
	EXPECT(&p, "@yard {\"step\": 1.5, \"a\": 1}", { "a", NONE, 1 });
	EXPECT(&p, "@yard {\"step\": \"7\", \"a\": 1}", { "a", NONE, 1 });
	EXPECT(&p, "@yard {\"a\": 1, \"step\": 9}", { "a", 9, 1 });
	EXPECT(&p, "@yard {\"step\": 9223372036854775807, \"a\": 1}", { "a", INT64_MAX, 1 });
	EXPECT_NONE(&p, "@yard {\"step\": 5}");
}

/* Only top-level numbers count: bools, strings, nulls and nesting are ignored. */
static void test_yard_ignored_values(void **state)
{
	struct metric_parser p;
	metric_parser_init(&p);
	EXPECT(&p, "@yard {\"ok\": true, \"no\": false, \"s\": \"0.5\", \"n\": null, "
		   "\"nest\": {\"loss\": 1}, \"arr\": [1, 2], \"loss\": 0.25}",
	       { "loss", NONE, 0.25 });
	EXPECT_NONE(&p, "@yard {\"deep\": [[[[{\"a\": [1]}]]]]}");
}

static void test_yard_malformed(void **state)
{
	static const char *const bad[] = {
		"@yard {",
		"@yard {\"loss\": }",
		"@yard {\"loss\": 0.3",
		"@yard {loss: 0.3}",
		"@yard {\"loss\": NaN}",
		"@yard {\"loss\": Infinity}",
		"@yard {\"loss\": 1e999}",
		"@yard {\"loss\": 99999999999999999999999}",
		"@yard [1, 2]",
		"@yard",
		"@yard ",
		"@yard{\"loss\": 1}",
		"@yardx {\"loss\": 1}",
		"yard {\"loss\": 1}",
		"",
		"@yard {\"a\": \"\\u0000\", \"b\": 1}",
	};
	struct metric_parser p;
	metric_parser_init(&p);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		EXPECT_NONE(&p, bad[i]);
}

/* Names: 1..128 bytes, no control characters; others are skipped alone. */
static void test_yard_names(void **state)
{
	char name128[129], line[400];
	struct metric_parser p;

	metric_parser_init(&p);
	memset(name128, 'n', 128);
	name128[128] = '\0';
	snprintf(line, sizeof(line), "@yard {\"%s\": 1, \"ok\": 2}", name128);
	EXPECT(&p, line, { name128, NONE, 1 }, { "ok", NONE, 2 });
	snprintf(line, sizeof(line), "@yard {\"%sx\": 1, \"ok\": 2}", name128);
	EXPECT(&p, line, { "ok", NONE, 2 });
	EXPECT(&p, "@yard {\"\": 1, \"a\\tb\": 2, \"a\\u007fb\": 3, \"ok\": 4}", { "ok", NONE, 4 });
	EXPECT(&p, "@yard {\"train/loss\": 1, \"\\u00e9t\\u00e9\": 2}",
	       { "train/loss", NONE, 1 }, { "\xc3\xa9t\xc3\xa9", NONE, 2 });
	assert_true(metric_name_valid("a", 1));
	assert_false(metric_name_valid("", 0));
	assert_false(metric_name_valid("a\nb", 3));
	assert_false(metric_name_valid(name128, 129));
}

/* ---- line handling ------------------------------------------------------- */

/* One line gives at most METRIC_LINE_POINTS points, the first ones. */
static void test_points_per_line(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	struct metric_points pts = METRIC_POINTS_INIT;
	struct metric_parser p;

	metric_parser_init(&p);
	strbuf_addstr(&sb, "@yard {\"step\": 1");
	for (int i = 0; i < METRIC_LINE_POINTS + 50; i++)
		strbuf_addf(&sb, ", \"m%d\": %d", i, i);
	strbuf_addstr(&sb, "}");
	assert_true(sb.len <= METRIC_LINE_MAX);
	EXPECT(&p, "@yard {\"before\": 1}", { "before", NONE, 1 });
	assert_int_equal(parse_n(&p, sb.buf, sb.len, &pts), METRIC_LINE_POINTS);
	assert_int_equal(pts.n, METRIC_LINE_POINTS);
	assert_string_equal(pts.v[0].name, "m0");
	assert_string_equal(pts.v[METRIC_LINE_POINTS - 1].name, "m999");
	/* points already in out are kept */
	assert_int_equal(parse_n(&p, sb.buf, sb.len, &pts), METRIC_LINE_POINTS);
	assert_int_equal(pts.n, 2 * METRIC_LINE_POINTS);
	assert_string_equal(pts.v[METRIC_LINE_POINTS].name, "m0");
	metric_points_release(&pts);
	strbuf_release(&sb);
}

static void test_lines(void **state)
{
	struct metric_parser p;
	struct metric_points pts = METRIC_POINTS_INIT;
	size_t big = METRIC_LINE_MAX + 1;
	char *line = xmalloc(big + 1);
	int k;

	metric_parser_init(&p);
	/* a progress bar redrawn with '\r': only what follows the last one */
	EXPECT(&p, "@yard {\"a\": 1}\r@yard {\"a\": 2}\r@yard {\"a\": 3}", { "a", NONE, 3 });
	EXPECT_NONE(&p, "@yard {\"a\": 1}\rplain text");
	/* NUL bytes do not end the line */
	static const char with_nul[] = "x\0@yard {\"a\": 1}";
	assert_int_equal(parse_n(&p, with_nul, sizeof(with_nul) - 1, &pts), 1);
	assert_string_equal(pts.v[0].name, "a");
	metric_points_release(&pts);
	/* exactly METRIC_LINE_MAX bytes is parsed, one more is not */
	k = snprintf(line, big + 1, "@yard {\"a\": 1, \"pad\": \"");
	memset(line + k, 'x', big - (size_t)k - 2);
	memcpy(line + big - 2, "\"}", 2);
	assert_int_equal(parse_n(&p, line, big, &pts), 0);
	assert_int_equal(pts.n, 0);
	memmove(line + k, line + k + 1, big - (size_t)k - 1);
	assert_int_equal(parse_n(&p, line, big - 1, &pts), 1);
	metric_points_release(&pts);
	free(line);
}

/* ---- Caffe --------------------------------------------------------------- */

static void test_caffe(void **state)
{
	struct metric_parser p;
	metric_parser_init(&p);
	/* net outputs before any iteration have no step */
	EXPECT(&p, "I0412 10:15:29.000001  1234 solver.cpp:237]     Train net output #0: loss = 2.3 (* 1 = 2.3 loss)",
	       { "loss", NONE, 2.3 });
	EXPECT(&p, "I0412 10:15:30.123456  1234 solver.cpp:218] Iteration 100 (12.3 iter/s, 8.1s/100 iters), loss = 0.35",
	       { "loss", 100, 0.35 });
	/* the raw loss of the same step is dropped; other outputs are not */
	EXPECT_NONE(&p, "I0412 10:15:30.123460  1234 solver.cpp:237]     Train net output #0: loss = 0.35 (* 1 = 0.35 loss)");
	EXPECT(&p, "I0412 10:15:30.123461  1234 solver.cpp:237]     Train net output #1: accuracy = 0.9",
	       { "accuracy", 100, 0.9 });
	EXPECT(&p, "I0412 10:15:30.123470  1234 sgd_solver.cpp:105] Iteration 100, lr = 0.01", { "lr", 100, 0.01 });
	/* old style, no glog prefix */
	EXPECT(&p, "Iteration 200, loss = 0.25", { "loss", 200, 0.25 });
	EXPECT(&p, "Iteration 200, lr = 0.009", { "lr", 200, 0.009 });
	/* test nets */
	EXPECT_NONE(&p, "I0412 10:16:00.000000  1234 solver.cpp:330] Iteration 500, Testing net (#0)");
	EXPECT(&p, "I0412 10:16:01.000000  1234 solver.cpp:397]     Test net output #0: accuracy = 0.98",
	       { "test/accuracy", 500, 0.98 });
	EXPECT(&p, "I0412 10:16:01.000000  1234 solver.cpp:397]     Test net output #1: loss = 0.05 (* 1 = 0.05 loss)",
	       { "test/loss", 500, 0.05 });
	EXPECT_NONE(&p, "Iteration 500, Testing net (#1)");
	EXPECT(&p, "    Test net output #0: loss3/top-1 = 0.7", { "test1/loss3/top-1", 500, 0.7 });
	/* a train output at an iteration whose line gave no loss is kept */
	EXPECT_NONE(&p, "Iteration 600 (10 iter/s, 10s/100 iters)");
	EXPECT(&p, "    Train net output #0: loss = 0.2 (* 1 = 0.2 loss)", { "loss", 600, 0.2 });
	/* not Caffe: the word inside other text, garbage after the number */
	EXPECT_NONE(&p, "NoIteration 5, loss = 1");
	EXPECT_NONE(&p, "Iteration 700, loss = 0.3x");
	EXPECT_NONE(&p, "Iteration 700, loss = nan");
	EXPECT_NONE(&p, "Iteration 700, loss = -nan");
	EXPECT_NONE(&p, "Iteration 700, loss = inf");
	EXPECT_NONE(&p, "Iteration 700 (unclosed, loss = 1");
	EXPECT_NONE(&p, "Iteration 99999999999999999999, loss = 1");
	EXPECT_NONE(&p, "Iteration , loss = 1");
	EXPECT(&p, "Iteration 800, loss = 1e-3", { "loss", 800, 1e-3 });
	EXPECT_NONE(&p, "Iteration 800, loss = 1e999");
}

/* ---- MXNet --------------------------------------------------------------- */

static void test_mxnet(void **state)
{
	struct metric_parser p;
	metric_parser_init(&p);
	EXPECT(&p, "INFO:root:Epoch[0] Batch [100]\tSpeed: 1234.56 samples/sec\taccuracy=0.912",
	       { "samples_per_sec", 100, 1234.56 }, { "accuracy", 100, 0.912 });
	EXPECT(&p, "INFO:root:Epoch[0] Batch [100-200]\tSpeed: 1000.00 samples/sec\taccuracy=0.93\tcross-entropy=0.2",
	       { "samples_per_sec", 200, 1000 }, { "accuracy", 200, 0.93 }, { "cross-entropy", 200, 0.2 });
	EXPECT(&p, "INFO:root:Epoch[0] Train-accuracy=0.95", { "train/accuracy", 0, 0.95 });
	EXPECT(&p, "INFO:root:Epoch[0] Time cost=12.345", { "time_cost", 0, 12.345 });
	EXPECT(&p, "INFO:root:Epoch[0] Validation-accuracy=0.97", { "validation/accuracy", 0, 0.97 });
	EXPECT_NONE(&p, "INFO:root:Epoch[0] Saved checkpoint to \"mnist-0001.params\"");
	/* the next epoch's batches continue after the last one counted */
	EXPECT(&p, "Epoch[1] Batch [100]  Speed: 900 samples/sec  Train-accuracy=0.96",
	       { "samples_per_sec", 300, 900 }, { "accuracy", 300, 0.96 });
	EXPECT(&p, "Epoch[1] Batch [0-200]\tSpeed: 950.5 samples/sec\taccuracy=0.97",
	       { "samples_per_sec", 400, 950.5 }, { "accuracy", 400, 0.97 });
	EXPECT(&p, "Iter[2] Batch [50]\tSpeed: 800 samples/sec", { "samples_per_sec", 450, 800 });
	EXPECT(&p, "Epoch[2] Train-accuracy=0.98\tValidation-accuracy=0.99",
	       { "train/accuracy", 2, 0.98 }, { "validation/accuracy", 2, 0.99 });
	/* not MXNet, or broken */
	EXPECT_NONE(&p, "MyEpoch[3] Train-accuracy=1");
	EXPECT_NONE(&p, "Epoch[x] Train-accuracy=1");
	EXPECT_NONE(&p, "Epoch[3 Train-accuracy=1");
	EXPECT_NONE(&p, "Epoch[3] Batch [7\tSpeed: 1 samples/sec");
	EXPECT_NONE(&p, "Epoch[3] Train-accuracy=nan");
	EXPECT_NONE(&p, "Epoch[3] Train-accuracy=0.5.5");
}

/* ---- Keras --------------------------------------------------------------- */

static void test_keras(void **state)
{
	struct metric_parser p;
	metric_parser_init(&p);
	EXPECT(&p, "1875/1875 [==============================] - 3s 1ms/step - loss: 0.2950 - accuracy: 0.9145 - val_loss: 0.1 - val_accuracy: 0.97",
	       { "loss", NONE, 0.295 }, { "accuracy", NONE, 0.9145 }, { "val_loss", NONE, 0.1 },
	       { "val_accuracy", NONE, 0.97 });
	/* Keras 3 bar, verbose=2, an in-place redraw that ends complete */
	EXPECT(&p, "\x31\x38\x37\x35/1875 \xe2\x94\x81\xe2\x94\x81\xe2\x94\x81 3s 1ms/step - accuracy: 0.9 - loss: 1.2e-01",
	       { "accuracy", NONE, 0.9 }, { "loss", NONE, 0.12 });
	EXPECT(&p, "1875/1875 - 3s - loss: 0.29 - accuracy: 0.91 - 3s/epoch - 2ms/step",
	       { "loss", NONE, 0.29 }, { "accuracy", NONE, 0.91 });
	EXPECT(&p, "  32/1875 [....] - ETA: 5s - loss: 1.2\r1875/1875 [====] - 3s 1ms/step - loss: 0.3",
	       { "loss", NONE, 0.3 });
	/* a bar still running: running averages, not points */
	EXPECT_NONE(&p, "  32/1875 [>.............................] - ETA: 5s - loss: 1.2 - accuracy: 0.6");
	EXPECT_NONE(&p, "Epoch 1/5");
	EXPECT_NONE(&p, "1/1");
	EXPECT_NONE(&p, "5/5 [==] - loss: nan - acc:0.5");
	EXPECT(&p, "5/5 [==] - loss: 0.5 - what: 3s - acc: 1", { "loss", NONE, 0.5 }, { "acc", NONE, 1 });
}

/* ---- state ----------------------------------------------------------------- */

static void assert_same_parser(const struct metric_parser *a, const struct metric_parser *b)
{
	assert_int_equal(a->caffe_iter, b->caffe_iter);
	assert_int_equal(a->caffe_loss_step, b->caffe_loss_step);
	assert_int_equal(a->caffe_test_net, b->caffe_test_net);
	assert_int_equal(a->mx_epoch, b->mx_epoch);
	assert_int_equal(a->mx_base, b->mx_base);
	assert_int_equal(a->mx_batch, b->mx_batch);
}

static void test_state_roundtrip(void **state)
{
	struct metric_parser p, q;
	json_t *doc;

	metric_parser_init(&p);
	EXPECT(&p, "Iteration 300, loss = 1", { "loss", 300, 1 });
	EXPECT_NONE(&p, "Iteration 400, Testing net (#2)");
	EXPECT(&p, "Epoch[4] Batch [60]\tSpeed: 1 samples/sec", { "samples_per_sec", 60, 1 });
	doc = metric_parser_save(&p);
	metric_parser_load(&q, doc);
	json_decref(doc);
	assert_same_parser(&p, &q);
	EXPECT(&q, "Test net output #0: accuracy = 0.5", { "test2/accuracy", 400, 0.5 });
	/* junk loads as a fresh parser */
	doc = json_pack("{s:s, s:i}", "caffe_iter", "x", "mx_base", -5);
	metric_parser_load(&q, doc);
	json_decref(doc);
	metric_parser_init(&p);
	assert_same_parser(&p, &q);
	metric_parser_load(&q, NULL);
	assert_same_parser(&p, &q);
}

/* Mutations of real lines: nothing may crash or read past a line (ASan). */
static void test_mutations(void **state)
{
	static const char *const seeds[] = {
		"@yard {\"step\": 120, \"loss\": 0.31, \"acc\": [0.94, {\"x\": 1}]}",
		"I0412 10:15:30.123456  1234 solver.cpp:218] Iteration 100 (12.3 iter/s, 8.1s/100 iters), loss = 0.35",
		"    Test net output #0: loss3/top-1 = 0.7 (* 1 = 0.7 loss)",
		"Iteration 500, Testing net (#0)",
		"INFO:root:Epoch[0] Batch [100-200]\tSpeed: 1000.00 samples/sec\taccuracy=0.93",
		"Epoch[2] Train-accuracy=0.98\tValidation-accuracy=0.99\tTime cost=1.5",
		"1875/1875 [======] - 3s 1ms/step - loss: 0.2950 - accuracy: 0.9145",
	};
	uint64_t x = 88172645463325252ULL;
	struct metric_parser p;
	char buf[256];

	metric_parser_init(&p);
	for (int round = 0; round < 200000; round++) {
		const char *seed = seeds[round % ARRAY_SIZE(seeds)];
		size_t len = strlen(seed), edits;
		struct metric_points pts = METRIC_POINTS_INIT;

		memcpy(buf, seed, len);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		edits = 1 + x % 4;
		for (size_t e = 0; e < edits; e++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			size_t at = (size_t)(x >> 8) % len;
			switch (x % 4) {
			case 0: /* replace a byte */
				buf[at] = (char)(x >> 40);
				break;
			case 1: /* cut the line */
				len = at;
				break;
			case 2: /* drop a byte */
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			default: { /* a structural byte */
				static const char structural[] = "{}[]\"\\:,-=()#/ \t\r0123456789.eE";
				buf[at] = structural[(x >> 20) % (sizeof(structural) - 1)];
			}
			}
			if (!len)
				break;
		}
		parse_n(&p, buf, len, &pts);
		for (size_t i = 0; i < pts.n; i++) {
			assert_true(metric_name_valid(pts.v[i].name, strlen(pts.v[i].name)));
			assert_true(isfinite(pts.v[i].value));
			assert_true(pts.v[i].step >= 0 || pts.v[i].step == NONE);
		}
		metric_points_release(&pts);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yard_basic),
		cmocka_unit_test(test_yard_prefixes),
		cmocka_unit_test(test_yard_step_rules),
		cmocka_unit_test(test_yard_ignored_values),
		cmocka_unit_test(test_yard_malformed),
		cmocka_unit_test(test_yard_names),
		cmocka_unit_test(test_points_per_line),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_caffe),
		cmocka_unit_test(test_mxnet),
		cmocka_unit_test(test_keras),
		cmocka_unit_test(test_state_roundtrip),
		cmocka_unit_test(test_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
