/* GET /v1/provisioners (master/elastic.h; the route table is api.c's): the
 * provisioned pools, their nodes by state, and the requests under way. */
#include "base/compat.h"
#include "master/api_handlers.h"

#include "master/core.h"
#include "master/elastic.h"
#include "master/http.h"

void h_provisioners(struct req *r)
{
	req_json(r, 200, elastic_json(r->m));
}
