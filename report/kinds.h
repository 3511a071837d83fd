// The capability table (driftlab/kinds.h) as text for a terminal and as the Markdown block of
// docs/ARCHITECTURE.md.
#pragma once
#include <string>

#include "driftlab/kinds.h"

namespace driftlab {
namespace report {

// One line per kind, one column per capability: yes, part (some variants: see the notes), no;
// then the notes, kind by kind.
std::string kinds_text(const KindTable& t);
// The docs' block: the symbol table (✓, ◐, ✗) and the notes, between the markers below.
std::string kinds_markdown(const KindTable& t);
inline constexpr const char* kKindsBegin = "<!-- driftlab model kinds --markdown: begin -->";
inline constexpr const char* kKindsEnd = "<!-- driftlab model kinds --markdown: end -->";

}  // namespace report
}  // namespace driftlab
