#include "report/kinds.h"

#include <algorithm>
#include <sstream>

namespace driftlab {
namespace report {

namespace {

const char* word(Support::Level l) {
  return l == Support::Level::all ? "yes" : l == Support::Level::some ? "part" : "no";
}
const char* symbol(Support::Level l) {
  return l == Support::Level::all ? "✓" : l == Support::Level::some ? "◐" : "✗";
}

std::string pad(const std::string& s, std::size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

}  // namespace

std::string kinds_text(const KindTable& t) {
  std::size_t kw = 6;
  for (const auto& r : t.rows) kw = std::max(kw, r.kind.size() + 2);
  std::ostringstream os;
  os << pad("kind", kw) << pad("family", 8);
  for (const auto& c : t.columns) os << pad(c.name, std::max<std::size_t>(c.name.size() + 2, 6));
  os << "\n";
  for (const auto& r : t.rows) {
    os << pad(r.kind, kw) << pad(r.family, 8);
    for (std::size_t c = 0; c < t.columns.size(); ++c)
      os << pad(word(r.cells[c].level), std::max<std::size_t>(t.columns[c].name.size() + 2, 6));
    os << "\n";
  }
  os << "\ncolumns:\n";
  for (const auto& c : t.columns) os << "  " << pad(c.name, 14) << c.what << "\n";
  os << "\nnotes (what each kind becomes, or why not):\n";
  for (const auto& r : t.rows) {
    os << "  " << r.kind << ":";
    bool first = true;
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      if (std::string(r.cells[c].note).empty()) continue;
      os << (first ? " " : "; ") << t.columns[c].name << ": " << r.cells[c].note;
      first = false;
    }
    os << "\n";
  }
  return os.str();
}

std::string kinds_markdown(const KindTable& t) {
  std::ostringstream os;
  os << kKindsBegin << "\n";
  os << "| kind | family |";
  for (const auto& c : t.columns) os << " " << c.name << " |";
  os << "\n|---|---|";
  for (std::size_t c = 0; c < t.columns.size(); ++c) os << "---|";
  os << "\n";
  for (const auto& r : t.rows) {
    os << "| " << r.kind << " | " << r.family << " |";
    for (const Support& s : r.cells) os << " " << symbol(s.level) << " |";
    os << "\n";
  }
  os << "\n✓ every variant, ◐ some (the note says which), ✗ none. Columns:\n\n";
  for (const auto& c : t.columns) os << "- **" << c.name << "**: " << c.what << "\n";
  os << "\nNotes, kind by kind (what it becomes, which variants, or why not):\n\n";
  for (const auto& r : t.rows) {
    os << "- `" << r.kind << "`:";
    bool first = true;
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      if (std::string(r.cells[c].note).empty()) continue;
      os << (first ? " " : "; ") << t.columns[c].name << ": " << r.cells[c].note;
      first = false;
    }
    os << "\n";
  }
  os << kKindsEnd << "\n";
  return os.str();
}

}  // namespace report
}  // namespace driftlab
