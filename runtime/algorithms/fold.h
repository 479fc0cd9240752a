// Folding a group of n ranks onto p = largest power of two <= n participants, as MPICH and Rabenseifner do
// for non-powers of two. Internal, shared by the recursive-doubling / halving-doubling family.
//
// The first 2*(n-p) ranks pair up (2i, 2i+1): the even rank hands its data to the odd one and sits out; the
// odd rank becomes participant i. Ranks >= 2*(n-p) become participant r-(n-p).
#pragma once

#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

struct Fold {
  int p = 1;      // participants (a power of two)
  int extra = 0;  // n - p
  // This rank's participant index, or -1 when it sits out.
  int Participant(int r) const {
    if (r < 2 * extra) return r % 2 == 1 ? r / 2 : -1;
    return r - extra;
  }
  int RankOf(int participant) const { return participant < extra ? 2 * participant + 1 : participant + extra; }
};

inline Fold MakeFold(int n) {
  Fold f;
  f.p = FloorPow2(n);
  f.extra = n - f.p;
  return f;
}

}  // namespace hccltune::algo
