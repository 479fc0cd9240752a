// The C ABI (runtime/api/hccltune.h) over hccltune::Communicator.
#include <exception>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "hccltune/version.h"
#include "runtime/api/communicator.h"
#include "runtime/api/hccltune.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/common/job_auth.h"

struct hccltune_comm {
  std::unique_ptr<hccltune::Communicator> comm;
  std::string fingerprint;
};
struct hccltune_request {
  std::shared_ptr<hccltune::Work> work;
};

namespace {

thread_local std::string g_error;

int Fail(const absl::Status& s) {
  g_error = std::string(s.message());
  return s.ok() ? 0 : static_cast<int>(s.code());
}
int Check(const absl::Status& s) { return s.ok() ? (g_error.clear(), 0) : Fail(s); }

int Bad(absl::string_view what) { return Fail(absl::InvalidArgumentError(what)); }

bool ToDtype(hccltune_dtype d, hccltune::DataType* out) {
  if (d < HCCLTUNE_INT8 || d > HCCLTUNE_FLOAT64) return false;
  *out = static_cast<hccltune::DataType>(d);
  return true;
}
bool ToOp(hccltune_op o, hccltune::ReduceOp* out) {
  if (o < HCCLTUNE_SUM || o > HCCLTUNE_BXOR) return false;
  *out = static_cast<hccltune::ReduceOp>(o);
  return true;
}
hccltune::CallOptions Opt(const char* config) {
  hccltune::CallOptions o;
  if (config != nullptr) o.config = config;
  return o;
}
absl::Span<const size_t> SpanOf(const size_t* p, int n) {
  return p == nullptr ? absl::Span<const size_t>() : absl::Span<const size_t>(p, static_cast<size_t>(n));
}

int Wrap(absl::StatusOr<std::unique_ptr<hccltune::Communicator>> c, hccltune_comm** out) {
  if (out == nullptr) return Bad("output pointer is NULL");
  *out = nullptr;
  if (!c.ok()) return Fail(c.status());
  auto* h = new hccltune_comm{*std::move(c), ""};
  if (h->comm) h->fingerprint = h->comm->fingerprint();
  *out = h->comm ? h : (delete h, nullptr);
  return Check(absl::OkStatus());
}

absl::StatusOr<hccltune::Environment> Env() { return hccltune::Environment::Load(); }

// Runs one entry point's body: no C++ exception crosses the C ABI (an allocation that fails — a communicator of
// 2^31 ranks, a scratch buffer for a huge call — becomes an error code and a message, not std::terminate).
template <typename F>
int Guard(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(absl::ResourceExhaustedError("out of memory"));
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(absl::StrCat("internal error: ", e.what())));
  } catch (...) {
    return Fail(absl::InternalError("internal error: unknown exception"));
  }
}

}  // namespace

#define HT_COMM(c) \
  if ((c) == nullptr || !(c)->comm) return Bad("communicator is NULL")
#define HT_DTYPE(d, var)  \
  hccltune::DataType var; \
  if (!ToDtype((d), &var)) return Bad(absl::StrCat("unknown dtype value ", static_cast<int>(d)))
#define HT_OP(o, var)     \
  hccltune::ReduceOp var; \
  if (!ToOp((o), &var)) return Bad(absl::StrCat("unknown reduce op value ", static_cast<int>(o)))

extern "C" {

int hccltune_c_api_version(void) { return HCCLTUNE_C_API_VERSION; }
const char* hccltune_version(void) { return HCCL_TUNE_VERSION; }
const char* hccltune_last_error(void) { return g_error.c_str(); }

int hccltune_comm_init_env(hccltune_comm** out) {
  return Guard([&]() -> int {
    auto env = Env();
    if (!env.ok()) return Fail(env.status());
    return Wrap(hccltune::Communicator::FromEnvironment(*env), out);
  });
}

int hccltune_comm_init_file(int rank, int size, const char* dir, hccltune_comm** out) {
  return Guard([&]() -> int {
    if (dir == nullptr) return Bad("rendezvous directory is NULL");
    auto env = Env();
    if (!env.ok()) return Fail(env.status());
    auto store = hccltune::NewFileStore(dir);
    if (!store.ok()) return Fail(store.status());
    return Wrap(hccltune::Communicator::Create(rank, size, *store, *env), out);
  });
}

int hccltune_comm_init_tcp(int rank, int size, const char* host, int port, hccltune_comm** out) {
  return Guard([&]() -> int {
    if (host == nullptr) return Bad("store host is NULL");
    auto env = Env();
    if (!env.ok()) return Fail(env.status());
    auto auth = hccltune::LoadJobAuth(*env);
    if (!auth.ok()) return Fail(auth.status());
    auto store = hccltune::ConnectTcpStore(host, port, absl::Seconds(env->connect_timeout_s), *auth);
    if (!store.ok()) return Fail(store.status());
    return Wrap(hccltune::Communicator::Create(rank, size, *store, *env), out);
  });
}

int hccltune_comm_split(hccltune_comm* comm, int color, int key, hccltune_comm** out) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    return Wrap(comm->comm->Split(color, key), out);
  });
}

void hccltune_comm_destroy(hccltune_comm* comm) { delete comm; }
int hccltune_comm_rank(const hccltune_comm* comm) { return comm && comm->comm ? comm->comm->rank() : -1; }
int hccltune_comm_size(const hccltune_comm* comm) { return comm && comm->comm ? comm->comm->size() : -1; }
const char* hccltune_comm_fingerprint(const hccltune_comm* comm) { return comm ? comm->fingerprint.c_str() : ""; }

int hccltune_mem_alloc(hccltune_comm* comm, size_t bytes, void** out) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    if (out == nullptr) return Bad("mem_alloc: out must not be NULL");
    *out = nullptr;
    absl::StatusOr<void*> p = comm->comm->AllocSymmetric(bytes);
    if (!p.ok()) return Fail(p.status());
    *out = *p;
    return Check(absl::OkStatus());
  });
}
int hccltune_mem_free(hccltune_comm* comm, void* ptr) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    return Check(comm->comm->FreeSymmetric(ptr));
  });
}

int hccltune_allreduce(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                       hccltune_op op, const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    HT_OP(op, o);
    return Check(comm->comm->Allreduce(send, recv, count, t, o, Opt(config)));
  });
}
int hccltune_allgather(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                       const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    return Check(comm->comm->Allgather(send, recv, count, t, Opt(config)));
  });
}
int hccltune_allgatherv(hccltune_comm* comm, const void* send, void* recv, const size_t* counts, const size_t* displs,
                        hccltune_dtype dtype, const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    if (counts == nullptr || displs == nullptr) return Bad("allgatherv: counts and displs must not be NULL");
    const int n = comm->comm->size();
    return Check(comm->comm->Allgatherv(send, recv, SpanOf(counts, n), SpanOf(displs, n), t, Opt(config)));
  });
}
int hccltune_reducescatter(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                           hccltune_op op, const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    HT_OP(op, o);
    return Check(comm->comm->Reducescatter(send, recv, count, t, o, Opt(config)));
  });
}
int hccltune_broadcast(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype, int root,
                       const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    return Check(comm->comm->Broadcast(send, recv, count, t, root, Opt(config)));
  });
}
int hccltune_reduce(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                    hccltune_op op, int root, const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    HT_OP(op, o);
    return Check(comm->comm->Reduce(send, recv, count, t, o, root, Opt(config)));
  });
}
int hccltune_gather(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype, int root,
                    const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    return Check(comm->comm->Gather(send, recv, count, t, root, Opt(config)));
  });
}
int hccltune_scatter(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype, int root,
                     const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    return Check(comm->comm->Scatter(send, recv, count, t, root, Opt(config)));
  });
}
int hccltune_alltoall(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                      const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    return Check(comm->comm->Alltoall(send, recv, count, t, Opt(config)));
  });
}
int hccltune_alltoallv(hccltune_comm* comm, const void* send, const size_t* send_counts, const size_t* send_displs,
                       void* recv, const size_t* recv_counts, const size_t* recv_displs, hccltune_dtype dtype,
                       const char* config) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    if (!send_counts || !send_displs || !recv_counts || !recv_displs) {
      return Bad("alltoallv: counts and displacements must not be NULL");
    }
    const int n = comm->comm->size();
    return Check(comm->comm->Alltoallv(send, SpanOf(send_counts, n), SpanOf(send_displs, n), recv,
                                       SpanOf(recv_counts, n), SpanOf(recv_displs, n), t, Opt(config)));
  });
}
int hccltune_barrier(hccltune_comm* comm) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    return Check(comm->comm->Barrier());
  });
}
int hccltune_send(hccltune_comm* comm, const void* data, size_t count, hccltune_dtype dtype, int peer) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    return Check(comm->comm->Send(data, count, t, peer));
  });
}
int hccltune_recv(hccltune_comm* comm, void* data, size_t count, hccltune_dtype dtype, int peer) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    return Check(comm->comm->Recv(data, count, t, peer));
  });
}

int hccltune_iallreduce(hccltune_comm* comm, const void* send, void* recv, size_t count, hccltune_dtype dtype,
                        hccltune_op op, const char* config, hccltune_request** out) {
  return Guard([&]() -> int {
    HT_COMM(comm);
    HT_DTYPE(dtype, t);
    HT_OP(op, o);
    if (out == nullptr) return Bad("request pointer is NULL");
    *out = new hccltune_request{comm->comm->Iallreduce(send, recv, count, t, o, Opt(config))};
    return Check(absl::OkStatus());
  });
}
int hccltune_test(hccltune_request* req, int* done) {
  return Guard([&]() -> int {
    if (req == nullptr || done == nullptr) return Bad("request or done is NULL");
    *done = req->work->Test() ? 1 : 0;
    return Check(absl::OkStatus());
  });
}
int hccltune_wait(hccltune_request* req) {
  return Guard([&]() -> int {
    if (req == nullptr) return Bad("request is NULL");
    return Check(req->work->Wait());
  });
}
void hccltune_request_free(hccltune_request* req) {
  if (req != nullptr && req->work) (void)req->work->Wait();
  delete req;
}

}  // extern "C"
