// Reading optional fields of JSON that another process wrote (a peer's bootstrap info, a database row, a child's
// progress line) without exceptions: nlohmann's `j.value(key, fallback)` throws when the field is there with
// another type (or `j` is not an object), and an uncaught type_error aborts the process — a daemon on every
// restart, when the row stays in its database.
//
// Header-only; needs nlohmann-json (the transport and everything above it link it). Thread-safe (pure).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hccltune {

// The field `key` of `j` as a T, or `fallback` when `j` is not an object, has no such field, or holds a value
// that does not convert to T (a string for a number, a number for a string, ...).
template <typename T>
T JsonOr(const nlohmann::json& j, const char* key, T fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

// String fields: `JsonOr(j, "name", "")` reads a std::string.
inline std::string JsonOr(const nlohmann::json& j, const char* key, const char* fallback) {
  return JsonOr<std::string>(j, key, std::string(fallback));
}

}  // namespace hccltune
