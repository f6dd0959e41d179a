#ifndef FL_JSON_H_
#define FL_JSON_H_

// The little JSON the result files need, written by hand (no JSON library in the
// dependency set).

#include <string>

namespace fl {

// `text` as a JSON string literal, quotes and backslashes escaped.
std::string JsonString(const std::string& text);

}  // namespace fl

#endif  // FL_JSON_H_
