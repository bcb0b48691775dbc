// A thin RAII layer over SQLite's C API: a connection, prepared statements with typed binds and columns,
// and transactions that roll back unless committed. Errors throw d2k::Error naming the database file
// and SQLite's message.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace d2k::campaign::sql {

class Statement;

class Database {
 public:
  // Opens (creating) the file in WAL mode, synchronous FULL, foreign keys on, waiting up to busy_ms for
  // another connection's lock.
  explicit Database(const std::filesystem::path& file, int busy_ms = 30000);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void exec(const std::string& sql);  // one or more statements, no results
  Statement prepare(std::string_view sql);
  int64_t last_insert_id() const;
  const std::string& file() const { return file_; }
  sqlite3* handle() const { return db_; }
  [[noreturn]] void error(const std::string& what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string file_;
};

class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds by 1-based index; returns *this for chaining. nullopt binds NULL.
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, uint64_t value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, bool value) { return bind(index, static_cast<int64_t>(value ? 1 : 0)); }
  Statement& bind(int index, const std::string& value);
  Statement& bind(int index, const char* value) { return bind(index, std::string(value)); }
  Statement& bind_null(int index);
  template <typename T>
  Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind_null(index);
  }

  bool step();  // true: a row is ready; false: done
  void run();   // steps to the end (an INSERT, an UPDATE)
  void reset();

  bool is_null(int column) const;
  int64_t integer(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  std::optional<double> optional_real(int column) const;
  std::optional<int64_t> optional_integer(int column) const;

 private:
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() ran.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

// A deferred read transaction (BEGIN): every query inside it sees one snapshot, even while another
// connection writes; it takes no write lock. Ends (COMMIT) on destruction.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Database& db);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  Database& db_;
};

}  // namespace d2k::campaign::sql
