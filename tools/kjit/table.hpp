#pragma once
// Human output for the CLI: a plain text table, columns sized to their widest cell.
#include <ostream>
#include <string>
#include <vector>

namespace kjit::cli {

class Table {
public:
  explicit Table(std::vector<std::string> headings) : rows_{std::move(headings)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream &out) const;

private:
  std::vector<std::vector<std::string>> rows_;
};

} // namespace kjit::cli
