/* The C ABI from plain C11: N processes (fork) with a file-store rendezvous run allreduce, allgather,
 * an allreduce on symmetric memory, a non-blocking allreduce and split, and check every element on every rank; then bad
 * input. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/api/hccltune.h"

#define CHECK(cond, ...)                  \
  do {                                    \
    if (!(cond)) {                        \
      fprintf(stderr, "rank %d: ", rank); \
      fprintf(stderr, __VA_ARGS__);       \
      fprintf(stderr, "\n");              \
      return 1;                           \
    }                                     \
  } while (0)

static int run_rank(int rank, int n, const char* dir) {
  hccltune_comm* comm = NULL;
  int rc = hccltune_comm_init_file(rank, n, dir, &comm);
  CHECK(rc == 0, "init: %s", hccltune_last_error());
  CHECK(hccltune_comm_rank(comm) == rank && hccltune_comm_size(comm) == n, "rank/size");
  CHECK(strlen(hccltune_comm_fingerprint(comm)) == 16, "fingerprint");

  enum { COUNT = 1001 };
  static float in[COUNT], out[COUNT];
  for (int i = 0; i < COUNT; ++i) in[i] = (float)(rank + i % 7);
  rc = hccltune_allreduce(comm, in, out, COUNT, HCCLTUNE_FLOAT32, HCCLTUNE_SUM, NULL);
  CHECK(rc == 0, "allreduce: %s", hccltune_last_error());
  for (int i = 0; i < COUNT; ++i) {
    const float want = (float)(n * (n - 1) / 2 + n * (i % 7));
    CHECK(out[i] == want, "allreduce[%d] = %f, want %f", i, out[i], want);
  }

  long long mine[3] = {rank, rank * 10, rank * 100}, all[3 * 8];
  rc = hccltune_allgather(comm, mine, all, 3, HCCLTUNE_INT64, "ring");
  CHECK(rc == 0, "allgather: %s", hccltune_last_error());
  for (int r = 0; r < n; ++r) CHECK(all[3 * r + 2] == r * 100, "allgather block %d", r);

  hccltune_request* req = NULL;
  int v = rank + 1, sum = 0;
  rc = hccltune_iallreduce(comm, &v, &sum, 1, HCCLTUNE_INT32, HCCLTUNE_MAX, "recursive_doubling", &req);
  CHECK(rc == 0, "iallreduce: %s", hccltune_last_error());
  CHECK(hccltune_wait(req) == 0, "wait: %s", hccltune_last_error());
  int done = 0;
  CHECK(hccltune_test(req, &done) == 0 && done == 1, "test after wait");
  hccltune_request_free(req);
  CHECK(sum == n, "iallreduce max = %d, want %d", sum, n);

  /* Symmetric memory: an allreduce from one place of the region to another, every element checked. */
  enum { SYM = 70000 }; /* floats: 280 KB, past the symmetric threshold */
  float* region = NULL;
  rc = hccltune_mem_alloc(comm, 2 * SYM * sizeof(float), (void**)&region);
  CHECK(rc == 0 && region != NULL, "mem_alloc: %s", hccltune_last_error());
  for (int i = 0; i < SYM; ++i) region[i] = (float)(rank + i % 5);
  rc = hccltune_allreduce(comm, region, region + SYM, SYM, HCCLTUNE_FLOAT32, HCCLTUNE_SUM, NULL);
  CHECK(rc == 0, "symmetric allreduce: %s", hccltune_last_error());
  for (int i = 0; i < SYM; ++i) {
    const float want = (float)(n * (n - 1) / 2 + n * (i % 5));
    CHECK(region[SYM + i] == want, "symmetric allreduce[%d] = %f, want %f", i, region[SYM + i], want);
  }
  CHECK(hccltune_mem_free(comm, region) == 0, "mem_free: %s", hccltune_last_error());
  rc = hccltune_mem_free(comm, region);
  CHECK(rc == 3 && strstr(hccltune_last_error(), "not the start of a symmetric allocation"), "double free: %d %s", rc,
        hccltune_last_error());

  hccltune_comm* half = NULL;
  rc = hccltune_comm_split(comm, rank % 2, rank, &half);
  CHECK(rc == 0 && half != NULL, "split: %s", hccltune_last_error());
  int one = 1, count = 0;
  CHECK(hccltune_allreduce(half, &one, &count, 1, HCCLTUNE_INT32, HCCLTUNE_SUM, NULL) == 0, "sub allreduce");
  CHECK(count == (rank % 2 == 0 ? (n + 1) / 2 : n / 2), "sub size %d", count);
  hccltune_comm_destroy(half);

  /* Bad input: clear errors, communicator still usable. */
  rc = hccltune_allreduce(comm, in, out, COUNT, (hccltune_dtype)42, HCCLTUNE_SUM, NULL);
  CHECK(rc == 3 && strstr(hccltune_last_error(), "unknown dtype value 42"), "bad dtype: %d %s", rc,
        hccltune_last_error());
  rc = hccltune_allreduce(comm, in, out, COUNT, HCCLTUNE_INT32, HCCLTUNE_AVG, NULL);
  CHECK(rc == 3 && strstr(hccltune_last_error(), "avg"), "int avg: %s", hccltune_last_error());
  rc = hccltune_allreduce(comm, in, out, COUNT, HCCLTUNE_FLOAT32, HCCLTUNE_SUM, "ring(chunk=0)");
  CHECK(rc == 3 && strstr(hccltune_last_error(), "chunk"), "bad config: %s", hccltune_last_error());
  CHECK(hccltune_allreduce(NULL, in, out, 1, HCCLTUNE_FLOAT32, HCCLTUNE_SUM, NULL) == 3, "null comm");
  CHECK(hccltune_barrier(comm) == 0, "barrier: %s", hccltune_last_error());
  hccltune_comm_destroy(comm);
  return 0;
}

int main(void) {
  const int n = 3;
  char dir[] = "/tmp/hccltune-capi-XXXXXX";
  if (mkdtemp(dir) == NULL) return 2;
  /* An impossible size is an error code at once (it used to build 2^31 rendezvous keys until memory ran out). */
  hccltune_comm* huge = NULL;
  int rc = hccltune_comm_init_file(0, 2147483647, dir, &huge);
  if (rc != 3 || huge != NULL || strstr(hccltune_last_error(), "between 1 and") == NULL) {
    fprintf(stderr, "init with size INT_MAX: rc %d, %s\n", rc, hccltune_last_error());
    return 1;
  }
  int rank = -1;
  pid_t pids[3];
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(run_rank(r, n, dir));
  }
  int failed = 0;
  for (int r = 0; r < n; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status %d)\n", r, status);
      failed = 1;
    }
  }
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  (void)rank;
  if (!failed) printf("C ABI: %d ranks passed\n", n);
  return failed;
}
