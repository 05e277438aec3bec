/*
 * allreduce: every MPI rank contributes to two MPI_Allreduce(MPI_SUM) calls
 * and checks the result it gets back against the closed form.
 *
 *   scalar: rank r contributes r + 1, so the sum is N(N+1)/2;
 *   vector: rank r contributes (r + 1) * (i + 1) at element i, so element i
 *           of the sum is (i + 1) * N(N+1)/2. The vector is large enough
 *           (VECTOR_LEN * 8 bytes = 2 MiB) for OpenMPI to split it into
 *           segments and use its bulk algorithms over the network.
 *
 * Integers (long long) make the comparison exact. Each rank prints
 *
 *   rank R of N on HOST: sum = X (expected Y) ok
 *   @yard {"rank": R, "sum": X}
 *
 * and rank 0, once every rank has reported through one more allreduce,
 *
 *   allreduce ok: N ranks, sum X
 *
 * A rank whose result is wrong prints "FAILED" and the reason, and exits 1
 * after MPI_Finalize; every rank then exits non-zero and so does mpirun.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define VECTOR_LEN (256 * 1024)

int main(int argc, char **argv)
{
	int rank, size, name_len;
	char host[MPI_MAX_PROCESSOR_NAME];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &name_len);

	const long long n = size;
	const long long expected = n * (n + 1) / 2;

	/* the scalar */
	long long mine = rank + 1, sum = 0;
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

	/* the vector */
	long long *in = malloc(VECTOR_LEN * sizeof(*in));
	long long *out = malloc(VECTOR_LEN * sizeof(*out));
	if (!in || !out) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (long long i = 0; i < VECTOR_LEN; i++)
		in[i] = (rank + 1) * (i + 1);
	MPI_Allreduce(in, out, VECTOR_LEN, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
	long long bad_at = -1;
	for (long long i = 0; i < VECTOR_LEN && bad_at < 0; i++)
		if (out[i] != (i + 1) * expected)
			bad_at = i;

	int ok = sum == expected && bad_at < 0;
	if (ok) {
		printf("rank %d of %d on %s: sum = %lld (expected %lld) ok\n", rank, size, host, sum,
		       expected);
	} else if (sum != expected) {
		printf("rank %d of %d on %s: sum = %lld (expected %lld) FAILED\n", rank, size, host,
		       sum, expected);
	} else {
		printf("rank %d of %d on %s: sum = %lld (expected %lld), but vector element %lld "
		       "= %lld (expected %lld) FAILED\n",
		       rank, size, host, sum, expected, bad_at, out[bad_at], (bad_at + 1) * expected);
	}
	printf("@yard {\"rank\": %d, \"sum\": %lld}\n", rank, sum);
	fflush(stdout);

	/* Everyone learns whether every rank was right (the logical AND of ok). */
	int all_ok = 0;
	MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	if (rank == 0) {
		if (all_ok)
			printf("allreduce ok: %d ranks, sum %lld\n", size, sum);
		else
			printf("allreduce FAILED: at least one of %d ranks got a wrong sum\n", size);
		fflush(stdout);
	}

	free(in);
	free(out);
	MPI_Finalize();
	return all_ok ? 0 : 1;
}
