#include "base/compat.h"
#include "common/logoffset.h"

struct log_chunk_decision log_chunk_decide(uint64_t have, uint64_t offset, uint64_t len)
{
	struct log_chunk_decision d = { LOG_CHUNK_DUPLICATE, 0 };
	if (offset > have) {
		d.action = LOG_CHUNK_GAP;
		return d;
	}
	if (len <= have - offset) {
		d.skip = len;
		return d;
	}
	d.action = LOG_CHUNK_APPEND;
	d.skip = have - offset;
	return d;
}
