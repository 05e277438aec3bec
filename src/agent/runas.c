#include "base/compat.h"
#include "agent/runas.h"

#include <pwd.h>
#include <sys/stat.h>

#include "base/fsutil.h"
#include "base/parse.h"
#include "base/xalloc.h"

/* The largest uid we hand out: (uid_t)-1 means "no change" to setresuid,
 * and -2 is nobody's on some systems. */
#define UID_LIMIT 4294967293ULL

static int bad(struct errbuf *eb, const char *what, const char *text, const char *why)
{
	return error(eb, YERR(BAD_REQUEST), "%s '%s': %s", what, text, why);
}

/* getpwnam(3): "not found" may come with errno 0, ENOENT, ESRCH, EBADF or EPERM. */
static bool pw_not_found(int e)
{
	return !e || e == ENOENT || e == ESRCH || e == EBADF || e == EPERM;
}

int runas_parse(const char *what, const char *text, struct runas *ra, struct errbuf *eb)
{
	const char *p = text;
	uint64_t a, b;

	memset(ra, 0, sizeof(*ra));
	if (!*text)
		return bad(eb, what, text, "expected USER, UID or FIRST-LAST");
	if (parse_u64(&p, &a) == 0 && *p == '-') {
		p++;
		if (parse_u64(&p, &b) < 0 || *p)
			return bad(eb, what, text, "expected FIRST-LAST, two uids");
		if (!a)
			return bad(eb, what, text,
			           "the range holds uid 0 (root): tasks must not run as root");
		if (b < a)
			return bad(eb, what, text, "the range ends before it starts");
		if (b > UID_LIMIT)
			return bad(eb, what, text, "the range goes past the largest uid");
		if (b - a + 1 > RUNAS_RANGE_MAX)
			return bad(eb, what, text, "the range holds more than 65536 uids");
		ra->on = ra->range = true;
		ra->first = (uid_t)a;
		ra->last = (uid_t)b;
		ra->job = xcalloc((size_t)(b - a + 1), sizeof(*ra->job));
		ra->refs = xcalloc((size_t)(b - a + 1), sizeof(*ra->refs));
		return 0;
	}
	p = text;
	if (parse_u64(&p, &a) == 0 && !*p) {
		struct passwd *pw;
		if (!a)
			return bad(eb, what, text, "uid 0 is root: tasks must not run as root");
		if (a > UID_LIMIT)
			return bad(eb, what, text, "not a valid uid");
		errno = 0;
		pw = getpwuid((uid_t)a);
		ra->uid = (uid_t)a;
		ra->gid = pw ? pw->pw_gid : (gid_t)a;
	} else {
		struct passwd *pw;
		errno = 0;
		pw = getpwnam(text);
		if (!pw)
			return bad(eb, what, text,
			           pw_not_found(errno) ? "no such user" : strerror(errno));
		if (!pw->pw_uid)
			return bad(eb, what, text,
			           "the user is root (uid 0): tasks must not run as root");
		ra->uid = pw->pw_uid;
		ra->gid = pw->pw_gid;
	}
	if (!ra->gid)
		return bad(eb, what, text, "the user's group is root's (gid 0)");
	ra->on = true;
	return 0;
}

void runas_release(struct runas *ra)
{
	free(ra->job);
	free(ra->refs);
	memset(ra, 0, sizeof(*ra));
}

int runas_acquire(struct runas *ra, int64_t job, uid_t *uid, gid_t *gid, struct errbuf *eb)
{
	size_t n, i, free_slot;

	if (!ra->range) {
		*uid = ra->uid;
		*gid = ra->gid;
		return 0;
	}
	n = (size_t)(ra->last - ra->first) + 1;
	free_slot = n;
	for (i = 0; i < n; i++) {
		if (ra->job[i] == job && ra->refs[i])
			break;
		if (!ra->refs[i] && free_slot == n)
			free_slot = i;
	}
	if (i == n)
		i = free_slot;
	if (i == n)
		return error(eb, YERR(UNAVAILABLE),
		             "every uid of --run-as %u-%u is held by a running job",
		             (unsigned)ra->first, (unsigned)ra->last);
	ra->job[i] = job;
	ra->refs[i]++;
	*uid = ra->first + (uid_t)i;
	*gid = (gid_t)*uid;
	return 0;
}

bool runas_hold(struct runas *ra, int64_t job, uid_t uid)
{
	size_t i;

	if (!ra->range)
		return uid == ra->uid;
	if (uid < ra->first || uid > ra->last)
		return false;
	i = (size_t)(uid - ra->first);
	if (ra->refs[i] && ra->job[i] != job)
		return false;
	ra->job[i] = job;
	ra->refs[i]++;
	return true;
}

bool runas_put(struct runas *ra, uid_t uid)
{
	size_t i;

	if (!ra->range || uid < ra->first || uid > ra->last)
		return false;
	i = (size_t)(uid - ra->first);
	if (!ra->refs[i])
		return false;
	if (--ra->refs[i])
		return false;
	ra->job[i] = 0;
	return true;
}

/* --run-as: the work dir must be reachable by the tasks' users (every dir
 * above it searchable by others), or each task would fail to enter its own
 * dir; the dir of task dirs and of checkpoints let a task reach its own
 * entry but list none (0711). */
int runas_prepare_work_dir(const char *work_dir, struct errbuf *eb)
{
	char *abs = realpath(work_dir, NULL), *p;
	const char *subs[] = { "tasks", "checkpoints", "outputs" };
	int ret = 0;

	if (!abs)
		return error(eb, YERR(IO), "cannot resolve '%s': %s", work_dir, strerror(errno));
	for (p = abs + strlen(abs); !ret && p > abs; p--) {
		struct stat st;
		if (*p != '/' && p != abs + strlen(abs))
			continue;
		char c = *p;
		*p = '\0';
		if (stat(abs, &st) == 0 && !(st.st_mode & S_IXOTH))
			ret = error(eb, YERR(BAD_REQUEST), "--run-as: the tasks' users cannot reach the work dir "
				    "'%s': '%s' has mode %04o (others need x)", work_dir, abs,
				    (unsigned)(st.st_mode & 07777));
		*p = c;
	}
	for (size_t i = 0; !ret && i < ARRAY_SIZE(subs); i++) {
		char *d = xasprintf("%s/%s", abs, subs[i]);
		if (mkdir_p(d, 0711) < 0 || chmod(d, 0711) < 0)
			ret = error(eb, YERR(IO), "cannot set up '%s': %s", d, strerror(errno));
		free(d);
	}
	free(abs);
	return ret;
}
