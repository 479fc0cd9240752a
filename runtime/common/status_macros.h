// Early-return helpers for absl::Status / absl::StatusOr, the one definition every module uses.
//
//   HT_RETURN_IF_ERROR(expr);          // expr is an absl::Status; returns it from the caller when not ok
//   HT_ASSIGN_OR_RETURN(name, expr);   // expr is an absl::StatusOr<T>; declares `auto& name = *result`,
//                                      // or returns the error status from the caller
//
// Both evaluate expr exactly once. HT_ASSIGN_OR_RETURN declares `name` in the enclosing scope (and a hidden
// `name##_or`), so use it once per name per scope. Thread-safety: macros only; no state.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define HT_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                               \
    if (const absl::Status _ht_status = (expr); !_ht_status.ok()) return _ht_status; \
  } while (0)

#define HT_ASSIGN_OR_RETURN(name, expr)           \
  auto name##_or = (expr);                        \
  if (!name##_or.ok()) return name##_or.status(); \
  auto& name = *name##_or
