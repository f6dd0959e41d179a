#ifndef FL_STATUS_MACROS_H_
#define FL_STATUS_MACROS_H_

// Debian's Abseil (20220623) has no ABSL_RETURN_IF_ERROR / ASSIGN_OR_RETURN;
// these are the project's single definitions.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FL_STATUS_CONCAT_INNER(a, b) a##b
#define FL_STATUS_CONCAT(a, b) FL_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define FL_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::absl::Status fl_status_ = (expr);          \
    if (!fl_status_.ok()) return fl_status_;     \
  } while (false)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its error.
#define FL_ASSIGN_OR_RETURN(lhs, expr) \
  FL_ASSIGN_OR_RETURN_IMPL(FL_STATUS_CONCAT(fl_statusor_, __LINE__), lhs, expr)

#define FL_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                             \
  if (!statusor.ok()) return statusor.status();       \
  lhs = std::move(statusor).value()

#endif  // FL_STATUS_MACROS_H_
