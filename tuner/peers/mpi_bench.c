/* hccl-tune-mpi-bench: times one MPI library's own collective algorithms for `hccl-tune sweep --runtime`.
 *
 * Built once per MPI library with that library's compiler wrapper (mpicc.openmpi, mpicc.mpich) and started by
 * its launcher; rank 0 reads commands on stdin, every rank runs them, rank 0 answers on stdout with lines that
 * start with "@ " (anything else on stdout is the launcher's or the library's and is ignored):
 *
 *   (at start)                          @ hello RUNTIME MAJOR.MINOR RANKS      RUNTIME: openmpi | mpich
 *   algorithms COLL                     @ algorithms COLL NAME...              the library's names, lower-case
 *   measure COLL BYTES ALGO SEG ITERS WARMUP
 *                                       @ times T1..Tn / R1..Rn                 microseconds per timed iteration:
 *                                                                               max over ranks / mean over ranks
 *   quit                                (exits)
 *
 * Errors answer "@ error MESSAGE". COLL: allreduce | allgather | broadcast | reducescatter (MPI_Reduce_scatter_block);
 * BYTES as docs/CONVENTIONS.md counts them (fp32 sum). ALGO is the library's algorithm name, or "default" (Open
 * MPI's own decision: its dynamic rules file when one is set, else its fixed rules) / "auto" (MPICH's own
 * selection). SEG: Open MPI's segment size in bytes (0 = none; MPICH ignores it).
 *
 * How an algorithm is forced, through the MPI tool interface (MPI_T control variables):
 *  - Open MPI (coll/tuned, launched with OMPI_MCA_coll_tuned_use_dynamic_rules=1): coll_tuned_<coll>_algorithm
 *    and coll_tuned_<coll>_algorithm_segmentsize are written, then MPI_COMM_WORLD is duplicated: coll/tuned reads
 *    the forced values when a communicator is created, so the duplicate runs the forced algorithm.
 *  - MPICH: MPIR_CVAR_<COLL>_INTRA_ALGORITHM is written, and MPIR_CVAR_<COLL>_DEVICE_COLLECTIVE set to 0 so the
 *    device layer (ch4) does not bypass the MPIR-level choice; "auto" restores both (MPICH reads them per call).
 *
 * Every batch checks the result of its last call on every rank (values derived from the ranks) and answers an
 * error naming the rank and element when one is wrong.
 */
#include <ctype.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kMaxLine = 1024, kMaxIters = 100000 };

typedef struct {
  const char* name;  /* ours */
  const char* ompi;  /* Open MPI's collective name in its MCA parameters */
  const char* mpich; /* MPICH's in its CVAR names */
  /* MPICH's algorithm names in the order of its enumerator values (MPICH's control variables carry no MPI_T
   * enumeration; each name is checked against the variable's description, in order, before it is used). */
  const char* mpich_names;
} Coll;

static const Coll kColls[] = {
    {"allreduce", "allreduce", "ALLREDUCE", "auto nb smp recursive_doubling reduce_scatter_allgather"},
    {"allgather", "allgather", "ALLGATHER", "auto brucks nb recursive_doubling ring"},
    {"broadcast", "bcast", "BCAST", "auto binomial nb smp scatter_recursive_doubling_allgather scatter_ring_allgather"},
    {"reducescatter", "reduce_scatter_block", "REDUCE_SCATTER_BLOCK",
     "auto noncommutative recursive_doubling pairwise recursive_halving nb"},
};

static int g_rank, g_size, g_is_ompi;
static MPI_Comm g_comm = MPI_COMM_NULL; /* the communicator collectives run on */
static float *g_in, *g_out;
static size_t g_cap; /* floats in each buffer */

static const Coll* FindColl(const char* name) {
  for (size_t i = 0; i < sizeof kColls / sizeof kColls[0]; i++)
    if (!strcmp(kColls[i].name, name)) return &kColls[i];
  return NULL;
}

/* Lower-case, '-' and ' ' as '_': the names hccl-tune stores. */
static void Normalize(char* s) {
  for (; *s; s++) *s = (*s == '-' || *s == ' ') ? '_' : (char)tolower((unsigned char)*s);
}

static char g_desc[8192]; /* the description of the control variable FindCvar found last */

static int FindCvar(const char* name, MPI_T_enum* enumtype) {
  int n = 0;
  MPI_T_cvar_get_num(&n);
  for (int i = 0; i < n; i++) {
    char nm[256];
    char* desc = g_desc;
    int nl = sizeof nm, dl = sizeof g_desc, verb, bind, scope;
    MPI_Datatype dt;
    MPI_T_enum en = MPI_T_ENUM_NULL;
    if (MPI_T_cvar_get_info(i, nm, &nl, &verb, &dt, &en, desc, &dl, &bind, &scope) != MPI_SUCCESS) continue;
    if (!strcmp(nm, name)) {
      if (enumtype) *enumtype = en;
      return i;
    }
  }
  return -1;
}

static int WriteCvarInt(const char* name, int value) {
  int idx = FindCvar(name, NULL), count;
  MPI_T_cvar_handle h;
  if (idx < 0) return -1;
  if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return -1;
  int rc = MPI_T_cvar_write(h, &value);
  MPI_T_cvar_handle_free(&h);
  return rc == MPI_SUCCESS ? 0 : -1;
}

static void AlgorithmCvar(const Coll* c, char* out, size_t n) {
  if (g_is_ompi)
    snprintf(out, n, "coll_tuned_%s_algorithm", c->ompi);
  else
    snprintf(out, n, "MPIR_CVAR_%s_INTRA_ALGORITHM", c->mpich);
}

/* Appends `item` to `list` (with `list`), or tells whether it is `name`. */
static int Visit(const char* item, const char* name, char* list, size_t list_cap) {
  if (!list) return !strcmp(item, name);
  if (strlen(list) + strlen(item) + 2 < list_cap) {
    strcat(list, " ");
    strcat(list, item);
  }
  return 0;
}

/* MPICH: the value of `name` from the known list, each name checked against the description in order. */
static int MpichValue(const Coll* c, const char* name, char* list, size_t list_cap) {
  char names[256], *save = NULL;
  const char* pos = g_desc;
  int value = 0;
  snprintf(names, sizeof names, "%s", c->mpich_names);
  for (char* item = strtok_r(names, " ", &save); item; item = strtok_r(NULL, " ", &save), value++) {
    const char* at = strstr(pos, item);
    if (!at) return -1; /* another MPICH: its list is not known here */
    pos = at + strlen(item);
    if (value > 0 && Visit(item, name, list, list_cap)) return value;
  }
  return -1;
}

/* The enumerator value of algorithm `name` (normalised) for collective `c`; -1 when unknown. With `list`, appends
 * every name but the library's own-choice one ("ignore" / "auto") to it instead. */
static int AlgorithmValue(const Coll* c, const char* name, char* list, size_t list_cap) {
  char cvar[128];
  MPI_T_enum en = MPI_T_ENUM_NULL;
  AlgorithmCvar(c, cvar, sizeof cvar);
  if (FindCvar(cvar, &en) < 0) return -1;
  if (!g_is_ompi) return MpichValue(c, name, list, list_cap);
  if (en == MPI_T_ENUM_NULL) return -1;
  int items = 0;
  char ename[64];
  int elen = sizeof ename;
  MPI_T_enum_get_info(en, &items, ename, &elen);
  for (int i = 0; i < items; i++) {
    int value;
    char item[128];
    int len = sizeof item;
    if (MPI_T_enum_get_item(en, i, &value, item, &len) != MPI_SUCCESS) continue;
    Normalize(item);
    if (value != 0 && Visit(item, name, list, list_cap)) return value;
  }
  return -1;
}

/* Makes `g_comm` run algorithm `algo` (with segment `seg`) for collective `c`. Returns an error text or NULL. */
static const char* Force(const Coll* c, const char* algo, long seg) {
  static char err[256];
  const int own = !strcmp(algo, g_is_ompi ? "default" : "auto");
  const int value = own ? 0 : AlgorithmValue(c, algo, NULL, 0);
  char cvar[160];
  if (value < 0) {
    snprintf(err, sizeof err, "%s has no algorithm '%s' in this library (see: algorithms %s)", c->name, algo, c->name);
    return err;
  }
  AlgorithmCvar(c, cvar, sizeof cvar);
  if (WriteCvarInt(cvar, value) != 0) {
    snprintf(err, sizeof err, "cannot write the control variable %s", cvar);
    return err;
  }
  if (g_is_ompi) {
    snprintf(cvar, sizeof cvar, "coll_tuned_%s_algorithm_segmentsize", c->ompi);
    if (WriteCvarInt(cvar, (int)seg) != 0) {
      snprintf(err, sizeof err, "cannot write the control variable %s", cvar);
      return err;
    }
    if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  } else {
    snprintf(cvar, sizeof cvar, "MPIR_CVAR_%s_DEVICE_COLLECTIVE", c->mpich);
    WriteCvarInt(cvar, own ? 1 : 0); /* absent in builds without device collectives: nothing to bypass */
    if (g_comm == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  }
  return NULL;
}

static int Reserve(size_t floats) {
  if (floats <= g_cap) return 0;
  free(g_in);
  free(g_out);
  g_in = malloc(floats * sizeof(float));
  g_out = malloc(floats * sizeof(float));
  if (!g_in || !g_out) return -1;
  g_cap = floats;
  return 0;
}

/* Element counts of one call: `count` = the buffer argument, `total` = floats touched in the larger buffer. */
static void Counts(const Coll* c, uint64_t bytes, size_t* count, size_t* total) {
  size_t floats = (size_t)(bytes / sizeof(float));
  if (floats < 1) floats = 1;
  if (!strcmp(c->name, "allgather") || !strcmp(c->name, "reducescatter")) {
    *count = floats / (size_t)g_size ? floats / (size_t)g_size : 1; /* per rank */
    *total = *count * (size_t)g_size;
  } else {
    *count = *total = floats;
  }
}

static void Prepare(const Coll* c, size_t total) {
  for (size_t i = 0; i < total; i++) g_in[i] = (float)(g_rank + 1);
  if (!strcmp(c->name, "broadcast") && g_rank == 0)
    for (size_t i = 0; i < total; i++) g_in[i] = 7.0f;
}

static void Call(const Coll* c, size_t count) {
  if (!strcmp(c->name, "allreduce"))
    MPI_Allreduce(g_in, g_out, (int)count, MPI_FLOAT, MPI_SUM, g_comm);
  else if (!strcmp(c->name, "allgather"))
    MPI_Allgather(g_in, (int)count, MPI_FLOAT, g_out, (int)count, MPI_FLOAT, g_comm);
  else if (!strcmp(c->name, "broadcast"))
    MPI_Bcast(g_in, (int)count, MPI_FLOAT, 0, g_comm); /* in place, as torch and nccl-tests run it */
  else
    MPI_Reduce_scatter_block(g_in, g_out, (int)count, MPI_FLOAT, MPI_SUM, g_comm);
}

/* -1 when this rank's result of the last call is right, else the index of the first wrong element. */
static long Check(const Coll* c, size_t count) {
  const float sum = (float)g_size * (float)(g_size + 1) / 2;
  if (!strcmp(c->name, "allreduce") || !strcmp(c->name, "reducescatter")) {
    for (size_t i = 0; i < count; i++)
      if (g_out[i] != sum) return (long)i;
  } else if (!strcmp(c->name, "allgather")) {
    for (size_t i = 0; i < count * (size_t)g_size; i++)
      if (g_out[i] != (float)(i / count + 1)) return (long)i;
  } else {
    for (size_t i = 0; i < count; i++)
      if (g_in[i] != 7.0f) return (long)i;
  }
  return -1;
}

/* Bookkeeping between the ranks uses point-to-point messages and MPI_Reduce only, never the collectives being
 * measured, so that a trace of those collectives' functions (the rules tests) shows the measured calls alone. */
static void ShareFromZero(void* buf, int count, MPI_Datatype type) {
  if (g_rank == 0) {
    for (int r = 1; r < g_size; r++) MPI_Send(buf, count, type, r, 0, MPI_COMM_WORLD);
  } else {
    MPI_Recv(buf, count, type, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

/* Every rank gets the maximum of `*value` and the lowest rank holding it. */
static void MaxLoc(int* value, int* rank) {
  struct {
    int value, rank;
  } local = {*value, g_rank}, best = {0, 0};
  MPI_Reduce(&local, &best, 1, MPI_2INT, MPI_MAXLOC, 0, MPI_COMM_WORLD);
  ShareFromZero(&best, 2, MPI_INT);
  *value = best.value;
  *rank = best.rank;
}

/* Runs one batch on every rank; rank 0 prints the answer. */
static void Measure(const Coll* c, uint64_t bytes, const char* algo, long seg, int iters, int warmup) {
  const char* err = Force(c, algo, seg);
  size_t count, total;
  Counts(c, bytes, &count, &total);
  int any_bad = err == NULL && Reserve(total) != 0, who = 0;
  MaxLoc(&any_bad, &who);
  if (err || any_bad) {
    if (g_rank == 0) printf("@ error %s\n", err ? err : "out of memory for the buffers");
    return;
  }
  Prepare(c, total);
  double *mine = malloc(sizeof(double) * (size_t)iters), *mx = malloc(sizeof(double) * (size_t)iters),
         *sum = malloc(sizeof(double) * (size_t)iters);
  for (int it = -warmup; it < iters; it++) {
    if (!strcmp(c->name, "broadcast") && g_rank != 0) g_in[0] = g_in[count - 1] = -1.0f; /* must arrive again */
    MPI_Barrier(g_comm);
    const double t0 = MPI_Wtime();
    Call(c, count);
    const double dt = (MPI_Wtime() - t0) * 1e6;
    if (it >= 0) mine[it] = dt;
  }
  long wrong = Check(c, count);
  int bad = wrong >= 0, bad_rank = 0;
  MaxLoc(&bad, &bad_rank);
  MPI_Reduce(mine, mx, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(mine, sum, iters, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (bad) {
    if (bad_rank != 0 && g_rank == bad_rank) MPI_Send(&wrong, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
    if (bad_rank != 0 && g_rank == 0) MPI_Recv(&wrong, 1, MPI_LONG, bad_rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (g_rank == 0)
      printf("@ error %s %s at %llu bytes: rank %d has a wrong result at element %ld\n", c->name, algo,
             (unsigned long long)bytes, bad_rank, wrong);
  } else if (g_rank == 0) {
    printf("@ times");
    for (int i = 0; i < iters; i++) printf(" %.3f", mx[i]);
    printf(" /");
    for (int i = 0; i < iters; i++) printf(" %.3f", sum[i] / g_size);
    printf("\n");
  }
  free(mine);
  free(mx);
  free(sum);
}

static void Hello(void) {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0, major = 0, minor = 0;
  MPI_Get_library_version(lib, &len);
  const char* v = strstr(lib, g_is_ompi ? "Open MPI v" : "MPICH Version:");
  if (v) {
    v += g_is_ompi ? strlen("Open MPI v") : strlen("MPICH Version:");
    while (*v == ' ' || *v == '\t') v++;
    sscanf(v, "%d.%d", &major, &minor);
  }
  printf("@ hello %s %d.%d %d\n", g_is_ompi ? "openmpi" : "mpich", major, minor, g_size);
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init(&argc, &argv);
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  g_is_ompi = strstr(lib, "Open MPI") != NULL;
  if (g_rank == 0) Hello();
  fflush(stdout);
  char line[kMaxLine];
  for (;;) {
    /* Rank 0 reads a command; everyone gets it (an empty line = end of input). */
    if (g_rank == 0 && !fgets(line, sizeof line, stdin)) line[0] = '\0';
    ShareFromZero(line, kMaxLine, MPI_CHAR);
    char verb[32] = "", coll[32] = "", algo[128] = "";
    unsigned long long bytes = 0;
    long seg = 0;
    int iters = 0, warmup = 0;
    const int n = sscanf(line, "%31s %31s %llu %127s %ld %d %d", verb, coll, &bytes, algo, &seg, &iters, &warmup);
    if (n < 1 || !strcmp(verb, "quit")) break;
    const Coll* c = n >= 2 ? FindColl(coll) : NULL;
    if (!c) {
      if (g_rank == 0)
        printf("@ error unknown collective '%s'; accepted: allreduce, allgather, broadcast, reducescatter\n", coll);
    } else if (!strcmp(verb, "algorithms")) {
      char list[4096] = "";
      AlgorithmValue(c, "", list, sizeof list);
      if (g_rank == 0) printf("@ algorithms %s%s\n", c->name, list);
    } else if (!strcmp(verb, "measure") && n == 7 && iters >= 1 && iters <= kMaxIters && warmup >= 0 &&
               warmup <= kMaxIters && seg >= 0 && seg <= (1L << 31)) {
      Measure(c, bytes, algo, seg, iters, warmup);
    } else if (g_rank == 0) {
      printf("@ error bad command: %s", line);
    }
    if (g_rank == 0) fflush(stdout);
  }
  if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
  free(g_in);
  free(g_out);
  MPI_T_finalize();
  MPI_Finalize();
  return 0;
}
