// Double binary tree allreduce (the shape of NCCL's tree allreduce): two complementary binary trees, each carrying
// half of the buffer, each a pipelined reduce to its root followed by a pipelined broadcast from it.
//
// Tree A is an in-order binary tree over ranks 1..n-1 under rank 0: rank r > 0 with lowest set bit b has children
// r - b/2 and r + b/2 (the right one halved until it is below n; none when b = 1), so odd ranks are leaves and even
// ranks interior; its parent is whichever of r - b, r + b has lowest set bit 2b (r - b when r + b >= n); rank 0 is
// the root with the one child pow2(n-1). Tree B is tree A relabelled: mirrored (r -> n-1-r) when n is even, shifted
// by one (r -> r-1 mod n) when n is odd. Either way a rank interior in A is a leaf in B and the other way round
// (rank 0 of an odd n, A's root with a single child, is B's only rank interior in both), so every rank sends and
// receives about the same bytes, and both directions of every link carry data. Depth ceil(log2 n) per tree.
//
// Tree A reduces and broadcasts elements [0, h), tree B [h, count), h = ceil(count/2); each half is cut into chunks
// of config.chunk bytes. Iteration i: for each tree, reduce chunk i (receive every child's partial of it, combine,
// lower rank's operand first, send the result to the parent; the root finishes an fp32/fp64 avg) and broadcast chunk
// i - D (receive it from the parent, send it to the children), D = 2 ceil(log2 n) + 1, so reduce and broadcast
// overlap once the pipe is full. Every rank runs the same iterations in the same order, so between any two ranks
// the messages of each direction are posted in the same order on both sides (FIFO matching), and every wait is for
// a message posted at an earlier iteration or deeper in the same step: no deadlock. Each element's value is
// computed once, by a tree's root, and copied: bit-identical on every rank. fp16/bf16 avg: inputs are scaled by 1/n
// as they enter recv (internal.h). Scratch: one chunk (staging, where the endpoint cannot reduce as it receives).
// Per rank about 2 x the buffer sent and received (1.5 in the tree where it is interior, 0.5 in the other);
// latency 2 ceil(log2 n) + chunks - 1 steps.
#include <vector>

#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {
namespace {

// One rank's place in one tree: its parent and children (-1: none), as group ranks.
struct TreeNode {
  int parent = -1;
  int child[2] = {-1, -1};
};

// Rank r of the in-order binary tree over [0, n) rooted at 0 (the block comment's tree A).
TreeNode InOrderNode(int n, int r) {
  TreeNode t;
  if (n < 2) return t;
  if (r == 0) {
    t.child[1] = FloorPow2(n - 1);
    return t;
  }
  const int b = r & -r;
  t.parent = (r & (2 * b)) != 0 ? r - b : r + b;
  if (t.parent >= n) t.parent = r - b;
  int h = b / 2;
  if (h >= 1) t.child[0] = r - h;
  while (h >= 1 && r + h >= n) h /= 2;
  if (h >= 1) t.child[1] = r + h;
  return t;
}

// Rank r's place in tree A (t = 0) or tree B (t = 1).
TreeNode TreeOf(int n, int r, int t) {
  if (t == 0) return InOrderNode(n, r);
  const bool mirror = n % 2 == 0;
  const auto to = [&](int x) { return mirror ? n - 1 - x : Mod(x - 1, n); };    // rank -> position in A
  const auto from = [&](int x) { return mirror ? n - 1 - x : Mod(x + 1, n); };  // position in A -> rank
  TreeNode a = InOrderNode(n, to(r));
  TreeNode out;
  out.parent = a.parent < 0 ? -1 : from(a.parent);
  for (int k = 0; k < 2; ++k) out.child[k] = a.child[k] < 0 ? -1 : from(a.child[k]);
  return out;
}

// One tree's share of the buffer: elements [first, first + count), in chunks of `chunk` elements.
struct Half {
  TreeNode node;
  size_t first = 0, count = 0, chunk = 1;
  size_t chunks() const { return CeilDiv(count, chunk); }
  size_t ChunkStart(size_t i) const { return first + i * chunk; }
  size_t ChunkLen(size_t i) const { return std::min(chunk, count - i * chunk); }
};

// Reduce step of chunk i: combine the children's partials into recv, send the result up (root: finish avg).
absl::Status ReduceChunk(const CollectiveArgs& args, const Group& g, const PeerReduce& reduce, const Half& h, size_t i,
                         char* stage) {
  char* data = At(args.recv, h.ChunkStart(i), g.dsize);
  const size_t len = h.ChunkLen(i);
  for (int c : h.node.child) {
    if (c >= 0) HT_RETURN_IF_ERROR(reduce.LowerFirst(c, data, data, len, stage));
  }
  if (h.node.parent >= 0) {
    g.ep->Isend(h.node.parent, data, len * g.dsize);
  } else {
    MaybeFinalizeAvg(args, data, len, g.size);
  }
  return absl::OkStatus();
}

// Broadcast step of chunk i: receive the final value from the parent (not at the root), send it to the children.
absl::Status BroadcastChunk(const CollectiveArgs& args, const Group& g, const Half& h, size_t i) {
  char* data = At(args.recv, h.ChunkStart(i), g.dsize);
  const size_t bytes = h.ChunkLen(i) * g.dsize;
  if (h.node.parent >= 0) HT_RETURN_IF_ERROR(g.ep->Recv(h.node.parent, data, bytes));
  for (int c : h.node.child) {
    if (c >= 0) g.ep->Isend(c, data, bytes);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AllreduceDoubleBinaryTree(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  EnterInput(args, args.recv, args.send, args.count, g.size);
  if (g.size == 1 || args.count == 0) {
    MaybeFinalizeAvg(args, args.recv, args.count, g.size);
    return absl::OkStatus();
  }
  const size_t chunk = ChunkElems(config.chunk, g.dsize);
  const size_t first_half = CeilDiv(args.count, 2);
  Half halves[2];
  for (int t = 0; t < 2; ++t) {
    halves[t].node = TreeOf(g.size, g.rank, t);
    halves[t].first = t == 0 ? 0 : first_half;
    halves[t].count = t == 0 ? first_half : args.count - first_half;
    halves[t].chunk = chunk;
  }
  const PeerReduce reduce(args, g);
  char* stage = reduce.Stages() ? static_cast<char*>(ctx.Scratch(std::min(chunk, first_half) * g.dsize)) : nullptr;
  const size_t lag = 2 * static_cast<size_t>(CeilLog2(g.size)) + 1;
  const size_t chunks = halves[0].chunks();  // tree B's half is never longer
  for (size_t i = 0; i < chunks + lag; ++i) {
    for (const Half& h : halves) {
      if (i < h.chunks()) HT_RETURN_IF_ERROR(ReduceChunk(args, g, reduce, h, i, stage));
      if (i >= lag && i - lag < h.chunks()) HT_RETURN_IF_ERROR(BroadcastChunk(args, g, h, i - lag));
    }
  }
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo
