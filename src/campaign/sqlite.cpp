#include "campaign/sqlite.hpp"

#include <sqlite3.h>

#include "core/error.hpp"

namespace d2k::campaign::sql {

Database::Database(const std::filesystem::path& file, int busy_ms) : file_(file.string()) {
  if (sqlite3_open_v2(file_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail("{}: cannot open the store: {}", file_, message);
  }
  sqlite3_busy_timeout(db_, busy_ms);
  // WAL: readers (`d2k campaign status` in another shell) never block the writer, and a commit is one
  // append; FULL: a committed transaction survives a machine crash, not only a killed process.
  exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;");
}

Database::~Database() { sqlite3_close(db_); }

void Database::error(const std::string& what) const { fail("{}: {}: {}", file_, what, sqlite3_errmsg(db_)); }

void Database::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    fail("{}: {}: {}", file_, sql.substr(0, 80), text);
  }
}

Statement Database::prepare(std::string_view sql) { return Statement(*this, sql); }

int64_t Database::last_insert_id() const { return sqlite3_last_insert_rowid(db_); }

Statement::Statement(Database& db, std::string_view sql) : db_(&db) {
  if (sqlite3_prepare_v2(db.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK)
    db.error(std::string("prepare ") + std::string(sql.substr(0, 80)));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }

Statement& Statement::bind(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) db_->error("bind");
  return *this;
}
Statement& Statement::bind(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) db_->error("bind");
  return *this;
}
Statement& Statement::bind(int index, const std::string& value) {
  if (sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT) != SQLITE_OK)
    db_->error("bind");
  return *this;
}
Statement& Statement::bind_null(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) db_->error("bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->error(std::string("step ") + sqlite3_sql(stmt_));
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column))) : "";
}
std::optional<double> Statement::optional_real(int column) const {
  return is_null(column) ? std::nullopt : std::optional<double>(real(column));
}
std::optional<int64_t> Statement::optional_integer(int column) const {
  return is_null(column) ? std::nullopt : std::optional<int64_t>(integer(column));
}

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }
Transaction::~Transaction() {
  if (!done_) {
    try {
      db_.exec("ROLLBACK");
    } catch (...) {
    }
  }
}
void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

ReadSnapshot::ReadSnapshot(Database& db) : db_(db) { db_.exec("BEGIN"); }
ReadSnapshot::~ReadSnapshot() {
  try {
    db_.exec("COMMIT");
  } catch (...) {
  }
}

}  // namespace d2k::campaign::sql
