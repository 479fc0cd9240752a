/* hccl-tune C ABI — a stable C interface over hccltune::Communicator for bindings (Python, Rust, Go, ...).
 *
 * Conventions: every function returns 0 on success or a non-zero status code (the absl/gRPC code numbers:
 * 3 invalid argument, 4 deadline exceeded, 9 failed precondition, 10 aborted, 14 unavailable, ...);
 * hccltune_last_error() then returns the message for the calling thread (valid until its next call).
 * Counts are in elements; buffer layouts are those of runtime/algorithms/algorithm.h. `config` is a
 * configuration string in canonical form (docs/CONVENTIONS.md) or NULL / "auto".
 *
 * Thread-safety: calls on one communicator are serialised internally; handles may be used from any thread.
 */
#ifndef HCCLTUNE_C_API_H_
#define HCCLTUNE_C_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCCLTUNE_C_API_VERSION 2 /* 2: hccltune_mem_alloc / hccltune_mem_free */

typedef struct hccltune_comm hccltune_comm;
typedef struct hccltune_request hccltune_request;

typedef enum {
  HCCLTUNE_INT8 = 0,
  HCCLTUNE_UINT8 = 1,
  HCCLTUNE_INT32 = 2,
  HCCLTUNE_INT64 = 3,
  HCCLTUNE_FLOAT16 = 4,
  HCCLTUNE_BFLOAT16 = 5,
  HCCLTUNE_FLOAT32 = 6,
  HCCLTUNE_FLOAT64 = 7
} hccltune_dtype;

typedef enum {
  HCCLTUNE_SUM = 0,
  HCCLTUNE_PROD = 1,
  HCCLTUNE_MIN = 2,
  HCCLTUNE_MAX = 3,
  HCCLTUNE_AVG = 4,
  HCCLTUNE_BAND = 5,
  HCCLTUNE_BOR = 6,
  HCCLTUNE_BXOR = 7
} hccltune_op;

int hccltune_c_api_version(void);
const char* hccltune_version(void);
const char* hccltune_last_error(void);

/* env:// bootstrap from the launcher's variables (torchrun, Open MPI, Slurm; see docs/ENVIRONMENT.md). */
int hccltune_comm_init_env(hccltune_comm** out);
/* Explicit rank/size with a rendezvous directory shared by all ranks (a file store). */
int hccltune_comm_init_file(int rank, int size, const char* dir, hccltune_comm** out);
/* Explicit rank/size with a running hccl-tune store server at host:port. */
int hccltune_comm_init_tcp(int rank, int size, const char* host, int port, hccltune_comm** out);
/* Sub-communicator; color < 0 yields *out == NULL. Collective over `comm`. */
int hccltune_comm_split(hccltune_comm* comm, int color, int key, hccltune_comm** out);
void hccltune_comm_destroy(hccltune_comm* comm);
int hccltune_comm_rank(const hccltune_comm* comm);
int hccltune_comm_size(const hccltune_comm* comm);
/* The topology fingerprint (16 hex digits); owned by the communicator. */
const char* hccltune_comm_fingerprint(const hccltune_comm* comm);

int hccltune_allreduce(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                       hccltune_op op, const char* config);
int hccltune_allgather(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                       const char* config);
int hccltune_allgatherv(hccltune_comm* comm, const void* send, void* recv, const size_t* counts, const size_t* displs,
                        hccltune_dtype dtype, const char* config);
int hccltune_reducescatter(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                           hccltune_op op, const char* config);
int hccltune_broadcast(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype, int root,
                       const char* config);
int hccltune_reduce(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                    hccltune_op op, int root, const char* config);
int hccltune_gather(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype, int root,
                    const char* config);
int hccltune_scatter(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype, int root,
                     const char* config);
int hccltune_alltoall(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                      const char* config);
int hccltune_alltoallv(hccltune_comm* comm, const void* send, const size_t* send_counts, const size_t* send_displs,
                       void* recv, const size_t* recv_counts, const size_t* recv_displs, hccltune_dtype dtype,
                       const char* config);
int hccltune_barrier(hccltune_comm* comm);
int hccltune_send(hccltune_comm* comm, const void* data, size_t count, hccltune_dtype dtype, int peer);
int hccltune_recv(hccltune_comm* comm, void* data, size_t count, hccltune_dtype dtype, int peer);

/* Symmetric memory (every rank of `comm` on one node). Collective: every rank asks for the same `bytes`;
 * *out is this rank's region (4 KiB aligned, zero-filled), which every other rank also maps. An allreduce whose
 * send and recv buffers lie at the same offsets of such regions on every rank reads its peers' inputs and writes
 * their outputs directly (the `symmetric` algorithm, chosen by "auto"). Free with hccltune_mem_free on every rank
 * once no call uses it; destroying the communicator frees the rest. */
int hccltune_mem_alloc(hccltune_comm* comm, size_t bytes, void** out);
int hccltune_mem_free(hccltune_comm* comm, void* ptr);

/* Non-blocking allreduce; complete with hccltune_wait (or poll with hccltune_test), then free. */
int hccltune_iallreduce(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                        hccltune_op op, const char* config, hccltune_request** out);
/* *done = 1 when complete. */
int hccltune_test(hccltune_request* req, int* done);
/* Blocks until complete; returns the call's status. */
int hccltune_wait(hccltune_request* req);
void hccltune_request_free(hccltune_request* req);

#ifdef __cplusplus
}
#endif

#endif /* HCCLTUNE_C_API_H_ */
