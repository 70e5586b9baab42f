// Tests of the SQLite tuning store: round trips of every field, lookups and their filters, measurements,
// files the store must refuse and leave untouched, read-only use, and concurrent writers (threads and
// processes). The JSON Lines export / import / merge tests are store_import_test.cpp.
#include "store_test_support.hpp"

using namespace store_test;

TEST_CASE("utc_now is ISO 8601 UTC with Z and close to the system clock") {
  const std::string now = utc_now();
  REQUIRE(std::regex_match(now, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  std::tm parsed{};
  std::istringstream in(now);
  in >> std::get_time(&parsed, "%Y-%m-%dT%H:%M:%SZ");
  REQUIRE(!in.fail());
  const std::time_t seconds = ::timegm(&parsed);
  CHECK(std::llabs(static_cast<long long>(seconds - std::time(nullptr))) <= 5);
}

TEST_CASE("put then find_exact returns every field unchanged, and the same key is replaced") {
  TempDir dir;
  const fs::path db = dir / "nested/folders/tuning.db";  // the folders do not exist yet
  const Record record = make_record("f32[64,128,3] perm=2,0,1");
  {
    Store store(db, OpenMode::kReadWrite);
    CHECK(store.path() == db);
    CHECK_FALSE(store.read_only());
    store.put(record);
    const auto found = store.find_exact(record.key.family, {record.key.template_hash}, record.key.signature,
                                        record.key.device_name, record.key.cc, record.key.sm_count,
                                        record.key.nvrtc_version);
    REQUIRE(found.has_value());
    check_same(*found, record);
  }
  CHECK(Store::schema_version() == 2);
  Store reopened(db, OpenMode::kReadWrite);  // persisted on disk
  REQUIRE(reopened.records().size() == 1);
  check_same(reopened.records()[0], record);

  Record faster = record;
  faster.config = "block=512,pack=4,unroll=4";
  faster.time_us = 9.75;
  reopened.put(faster);
  const auto all = reopened.records();
  REQUIRE(all.size() == 1);
  check_same(all[0], faster);
}

TEST_CASE("put refuses numbers the store cannot keep") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  Record record = make_record("a");
  record.features[2] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(store.put(record), InvalidArgument);
  record = make_record("a");
  record.time_us = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(store.put(record), InvalidArgument);
  Measurement measurement = make_measurement(record.key, "block=1", "ok", 1.0);
  measurement.time_us = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(store.put(measurement), InvalidArgument);
  CHECK(store.records().empty());
  CHECK(store.measurements(record.key, {record.key.template_hash}).empty());
}

TEST_CASE("find_exact prefers the requested NVRTC version, then the newest record") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  auto put = [&](const std::string& nvrtc, const std::string& created_at, const std::string& config) {
    Record record = make_record("sig");
    record.key.nvrtc_version = nvrtc;
    record.created_at = created_at;
    record.config = config;
    store.put(record);
  };
  put("12.4", "2026-01-02T00:00:00Z", "newest");
  put("13.0", "2026-01-01T00:00:00Z", "middle");
  put("12.8", "2025-06-01T00:00:00Z", "oldest");
  const RecordKey key = make_key("sig");
  auto config_for = [&](const std::string& nvrtc) {
    const auto found = store.find_exact(key.family, {key.template_hash}, key.signature, key.device_name, key.cc,
                                        key.sm_count, nvrtc);
    return found ? found->config + "@" + found->key.nvrtc_version : std::string("none");
  };
  CHECK(config_for("13.0") == "middle@13.0");
  CHECK(config_for("12.8") == "oldest@12.8");
  CHECK(config_for("12.4") == "newest@12.4");
  CHECK(config_for("11.0") == "newest@12.4");  // not present: newest wins

  CHECK_FALSE(
      store.find_exact(key.family, {"tmpl-2"}, key.signature, key.device_name, key.cc, key.sm_count, "13.0"));
  CHECK_FALSE(store.find_exact(key.family, {key.template_hash}, "other", key.device_name, key.cc, key.sm_count,
                               "13.0"));
  CHECK_FALSE(store.find_exact(key.family, {key.template_hash}, key.signature, "NVIDIA H200", key.cc,
                               key.sm_count, "13.0"));
  CHECK_FALSE(store.find_exact(key.family, {key.template_hash}, key.signature, key.device_name, 89,
                               key.sm_count, "13.0"));
  CHECK_FALSE(
      store.find_exact(key.family, {key.template_hash}, key.signature, key.device_name, key.cc, 114, "13.0"));
  CHECK_FALSE(store.find_exact("conv2d", {key.template_hash}, key.signature, key.device_name, key.cc,
                               key.sm_count, "13.0"));
}

TEST_CASE("find_group and find_same_arch filter by family, template hash, group, device and cc") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  auto put = [&](const std::string& signature, auto&& change) {
    Record record = make_record(signature);
    record.group = "g1";
    change(record);
    store.put(record);
  };
  auto same = [](Record&) {};
  put("s1", same);
  put("s2", same);
  put("s3", [](Record& r) { r.group = "g2"; });
  put("s1", [](Record& r) { r.key.device_name = "NVIDIA H200"; });
  put("s1", [](Record& r) {
    r.key.device_name = "NVIDIA H100 PCIe";
    r.key.sm_count = 114;
  });
  put("s1", [](Record& r) {
    r.key.device_name = "NVIDIA A100";
    r.key.cc = 80;
    r.key.sm_count = 108;
  });
  put("s4", [](Record& r) { r.key.template_hash = "tmpl-0"; });  // stale: tuned with an older template
  put("s1", [](Record& r) { r.key.family = "conv2d"; });

  auto signatures = [](const std::vector<Record>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(r.key.signature + "@" + r.key.device_name);
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  CHECK(signatures(store.find_group("permute", {"tmpl-1"}, "g1", h100, 90, 132)) ==
        std::vector<std::string>{"s1@" + h100, "s2@" + h100});
  CHECK(signatures(store.find_group("permute", {"tmpl-1"}, "g2", h100, 90, 132)) ==
        std::vector<std::string>{"s3@" + h100});
  CHECK(signatures(store.find_group("permute", {"tmpl-0"}, "g1", h100, 90, 132)) ==
        std::vector<std::string>{"s4@" + h100});
  CHECK(store.find_group("permute", {"tmpl-9"}, "g1", h100, 90, 132).empty());
  CHECK(store.find_group("permute", {"tmpl-1"}, "g1", h100, 90, 114).empty());
  CHECK(store.find_group("permute", {"tmpl-1"}, "g1", h100, 80, 132).empty());

  CHECK(signatures(store.find_same_arch("permute", {"tmpl-1"}, "g1", 90, h100)) ==
        std::vector<std::string>{"s1@NVIDIA H100 PCIe", "s1@NVIDIA H200"});
  CHECK(signatures(store.find_same_arch("permute", {"tmpl-1"}, "g1", 80, h100)) ==
        std::vector<std::string>{"s1@NVIDIA A100"});
  CHECK(store.find_same_arch("permute", {"tmpl-9"}, "g1", 90, h100).empty());

  // A record whose template hash no longer matches must never come back.
  const RecordKey stale = make_key("s4");
  CHECK_FALSE(store.find_exact("permute", {"tmpl-1"}, "s4", stale.device_name, 90, 132, "13.0"));
  CHECK(store.find_group("permute", {"tmpl-1"}, "g1", h100, 90, 132).size() == 2);

  // A family whose kernels live in several templates asks for all of their hashes at once: any of them matches,
  // a hash that only starts or ends like one of them does not, and no hash matches nothing.
  CHECK(signatures(store.find_group("permute", {"tmpl-9", "tmpl-0", "tmpl-1"}, "g1", h100, 90, 132)) ==
        std::vector<std::string>{"s1@" + h100, "s2@" + h100, "s4@" + h100});
  CHECK(store.find_exact("permute", {"tmpl-9", "tmpl-0"}, "s4", stale.device_name, 90, 132, "13.0"));
  CHECK(store.find_group("permute", {"tmpl-", "mpl-1", "tmpl-10"}, "g1", h100, 90, 132).empty());
  CHECK(store.find_group("permute", {"tmpl-0,tmpl-1"}, "g1", h100, 90, 132).empty());
  CHECK(store.find_group("permute", {}, "g1", h100, 90, 132).empty());
  CHECK(signatures(store.find_same_arch("permute", {"tmpl-0", "tmpl-1"}, "g1", 90, h100)) ==
        std::vector<std::string>{"s1@NVIDIA H100 PCIe", "s1@NVIDIA H200"});
}

TEST_CASE("records() order and erase") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  for (const char* family : {"permute", "conv2d", "elementwise"}) {
    for (const char* signature : {"b", "a", "c"}) {
      for (int sm_count : {132, 114}) {
        Record record = make_record(signature);
        record.key.family = family;
        record.key.sm_count = sm_count;
        store.put(record);
      }
    }
  }
  const auto all = store.records();
  REQUIRE(all.size() == 18);
  auto order = [](const Record& r) {
    return std::tie(r.key.family, r.key.signature, r.key.device_name, r.key.cc, r.key.sm_count,
                    r.key.nvrtc_version, r.key.template_hash);
  };
  CHECK(std::is_sorted(all.begin(), all.end(),
                       [&](const Record& a, const Record& b) { return order(a) < order(b); }));
  CHECK(all.front().key.family == "conv2d");
  CHECK(all.front().key.sm_count == 114);

  CHECK(store.erase("permute", "a") == 2);
  CHECK(store.erase("permute", "a") == 0);
  CHECK(store.records().size() == 16);
  CHECK(store.erase("permute", "") == 4);
  CHECK(store.erase("nothing", "") == 0);
  const auto left = store.records();
  CHECK(left.size() == 12);
  for (const auto& record : left) CHECK(record.key.family != "permute");
}

TEST_CASE("measurements: same config replaces, fastest ok first, keys kept apart") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  const RecordKey key = make_key("m");
  RecordKey other = key;
  other.nvrtc_version = "12.8";
  store.put(make_measurement(key, "block=64", "ok", 5.0));
  store.put(make_measurement(key, "block=128", "ok", 3.0));
  store.put(make_measurement(key, "block=1024", "compile_failed", 0.0));
  store.put(make_measurement(key, "block=32", "cut", 9.0));
  store.put(make_measurement(key, "block=256", "ok", 4.0));
  store.put(make_measurement(other, "block=64", "ok", 1.0));

  auto configs = [&] {
    std::vector<std::string> out;
    for (const auto& m : store.measurements(key, {key.template_hash})) out.push_back(m.config);
    return out;
  };
  CHECK(configs() ==
        std::vector<std::string>{"block=128", "block=256", "block=64", "block=1024", "block=32"});

  store.put(make_measurement(key, "block=64", "ok", 1.5));  // re-measured: replaces the older one
  CHECK(configs() ==
        std::vector<std::string>{"block=64", "block=128", "block=256", "block=1024", "block=32"});

  const auto all = store.measurements(key, {key.template_hash});
  REQUIRE(all.size() == 5);
  const Measurement expected = make_measurement(key, "block=1024", "compile_failed", 0.0);
  const Measurement& failed = all[3];
  CHECK(failed.key == key);
  CHECK(failed.status == "compile_failed");
  CHECK(failed.reason == expected.reason);
  CHECK(failed.time_us == 0.0);
  CHECK(failed.spread == expected.spread);
  CHECK(failed.reps == 0);
  CHECK(failed.created_at == expected.created_at);
  CHECK(all[0].time_us == 1.5);
  CHECK(all[0].reps == 21);

  const auto other_measurements = store.measurements(other, {other.template_hash});
  REQUIRE(other_measurements.size() == 1);
  CHECK(other_measurements[0].time_us == 1.0);
  CHECK(store.measurements(make_key("none"), {make_key("none").template_hash}).empty());

  // Measurements of another template of the family (a kernel kept in a template of its own) come back with it when
  // asked for, each with its own hash; the key's hash is not read.
  RecordKey second = key;
  second.template_hash = "tmpl-2";
  store.put(make_measurement(second, "block=512", "ok", 2.0));
  CHECK(store.measurements(key, {key.template_hash}).size() == 5);
  const auto both = store.measurements(second, {key.template_hash, "tmpl-2"});
  REQUIRE(both.size() == 6);
  CHECK(both[0].config == "block=64");
  CHECK(both[0].key.template_hash == key.template_hash);
  CHECK(both[1].config == "block=512");
  CHECK(both[1].key.template_hash == "tmpl-2");
  CHECK(store.measurements(key, {"tmpl-2"}).size() == 1);
}

TEST_CASE("a store written by a newer jitune is refused and left byte for byte unchanged") {
  TempDir dir;
  const fs::path db = dir / "s.db";
  { Store(db, OpenMode::kReadWrite).put(make_record("a")); }
  run_sql(db, "UPDATE schema_version SET version = 99");
  const std::string before = read_bytes(db);
  REQUIRE(!before.empty());
  for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
    const std::string message = error_of([&] { Store store(db, mode); });
    INFO(message);
    CHECK(message.find("newer jitune (schema 99 > 2") != std::string::npos);
    CHECK(message.find("upgrade jitune or point JITUNE_CACHE_DIR elsewhere") != std::string::npos);
    CHECK(message.find(db.string()) != std::string::npos);
  }
  CHECK(read_bytes(db) == before);
}

TEST_CASE("a file that is not SQLite is refused and left untouched") {
  TempDir dir;
  const fs::path db = dir / "tuning.db";
  std::mt19937 random(7);
  std::string text;
  for (int i = 0; i < 5000; ++i) text += static_cast<char>(' ' + random() % 94);
  write_text(db, text);
  for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
    const std::string message = error_of([&] { Store store(db, mode); });
    INFO(message);
    CHECK(message.find(db.string()) != std::string::npos);
    CHECK(message.find("left untouched") != std::string::npos);
  }
  CHECK(read_bytes(db) == text);
  CHECK_FALSE(fs::exists(dir / "tuning.db-wal"));
}

TEST_CASE("an SQLite database of something else is refused and left untouched") {
  TempDir dir;
  const fs::path db = dir / "other.db";
  run_sql(db, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')");
  const std::string before = read_bytes(db);
  for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
    const std::string message = error_of([&] { Store store(db, mode); });
    INFO(message);
    CHECK(message.find("not a jitune tuning store") != std::string::npos);
  }
  CHECK(read_bytes(db) == before);
}

TEST_CASE("read-only stores read, refuse every write, and never create files") {
  TempDir dir;
  const fs::path db = dir / "s.db";
  {
    Store writer(db, OpenMode::kReadWrite);
    writer.put(make_record("a"));
    writer.put(make_measurement(make_key("a"), "block=64", "ok", 2.0));
  }
  const fs::path jsonl = dir / "in.jsonl";
  write_text(jsonl, to_json_line(make_record("b")) + "\n");
  Store store(db, OpenMode::kReadOnly);
  CHECK(store.read_only());
  CHECK(store.records().size() == 1);
  CHECK(store.measurements(make_key("a"), {make_key("a").template_hash}).size() == 1);
  Store source(dir / "source.db", OpenMode::kReadWrite);
  source.put(make_record("c"));
  const std::vector<std::function<void()>> writes = {
      [&] { store.put(make_record("b")); },
      [&] { store.put(make_measurement(make_key("b"), "block=1", "ok", 1.0)); },
      [&] { store.erase("permute", ""); },
      [&] { store.import_jsonl(jsonl, nullptr); },
      [&] { store.merge_from(source, nullptr); },
  };
  for (const auto& write : writes) CHECK(error_of(write).find("read-only") != std::string::npos);
  CHECK(Store(db, OpenMode::kReadWrite).records().size() == 1);
  CHECK(store.measurements(make_key("b"), {make_key("b").template_hash}).empty());

  // Export only reads, so it works read-only.
  store.export_jsonl(dir / "out.jsonl");
  CHECK(read_lines(dir / "out.jsonl").size() == 1);

  const fs::path missing = dir / "missing.db";
  CHECK(error_of([&] { Store s(missing, OpenMode::kReadOnly); }).find("does not exist") != std::string::npos);
  CHECK_FALSE(fs::exists(missing));
}

TEST_CASE("a read-only open of an empty database reads as empty until the schema appears") {
  TempDir dir;
  const fs::path db = dir / "s.db";
  write_text(db, "");  // a zero-length file is an empty SQLite database
  Store reader(db, OpenMode::kReadOnly);
  CHECK(reader.records().empty());
  CHECK_FALSE(reader.find_exact("permute", {"tmpl-1"}, "a", "NVIDIA H100 80GB HBM3", 90, 132, "13.0"));
  CHECK(reader.find_group("permute", {"tmpl-1"}, "g", "NVIDIA H100 80GB HBM3", 90, 132).empty());
  CHECK(reader.measurements(make_key("a"), {make_key("a").template_hash}).empty());
  {
    Store writer(db, OpenMode::kReadWrite);
    writer.put(make_record("a"));
  }
  CHECK(reader.records().size() == 1);
}

// As root, file permissions apply only to a child that became user nobody; where that is impossible the case is
// reported skipped (never passed without its checks).
TEST_CASE("read-only open of a chmod 0444 file, and of a folder that cannot be written" *
          doctest::skip(!store_test::permissions_can_apply())) {
  TempDir dir;
  const fs::path db = dir / "s.db";
  {
    Store writer(db, OpenMode::kReadWrite);
    for (int i = 0; i < 3; ++i) writer.put(make_record("r" + std::to_string(i)));
  }
  REQUIRE_FALSE(fs::exists(dir / "s.db-wal"));  // the last connection checkpointed and removed it
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  {
    Store reader(db, OpenMode::kReadOnly);
    CHECK(reader.records().size() == 3);
  }
  // A read-only connection may leave empty -wal / -shm files; a shipped cache file comes without them.
  if (fs::exists(dir / "s.db-wal")) REQUIRE(fs::file_size(dir / "s.db-wal") == 0);
  fs::remove(dir / "s.db-wal");
  fs::remove(dir / "s.db-shm");
  // The next checks need file permissions to apply: as root they run in a child that becomes user nobody.
  const bool root = ::geteuid() == 0;
  auto read_only_checks = [&] {
    try {
      Store writable(db, OpenMode::kReadWrite);
      return 2;  // a read-write open of a file we cannot write must fail
    } catch (const StoreError&) {
    }
    Store reader(db, OpenMode::kReadOnly);
    return reader.records().size() == 3 ? 0 : 3;
  };
  int code = run_in_child(true, read_only_checks);
  CHECK(code == 0);  // 77: the child could not become nobody, though permissions_can_apply() said it could
  // A folder nobody may write (a shipped cache under /usr/share): SQLite cannot create the -shm file there.
  fs::permissions(dir.path(), fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  code = run_in_child(true, read_only_checks);
  fs::permissions(dir.path(), fs::perms::owner_write, fs::perm_options::add);
  CHECK(code == 0);
  if (root) MESSAGE("running as root: the permission checks ran as user nobody in a child process");
}

TEST_CASE("threads share one store") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 50; ++i) {
          const std::string signature = "t" + std::to_string(t) + "_" + std::to_string(i);
          store.put(make_record(signature));
          store.put(make_measurement(make_key(signature), "block=64", "ok", 1.0 + i));
          const RecordKey key = make_key(signature);
          if (!store.find_exact(key.family, {key.template_hash}, key.signature, key.device_name, key.cc,
                                key.sm_count, key.nvrtc_version)) {
            ++failures;
          }
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(store.records().size() == 200);
}

TEST_CASE("4 writer processes on one file: no 'database is locked', every record kept") {
  TempDir dir;
  const fs::path db = dir / "shared/tuning.db";  // created by the children, racing each other
  constexpr int kChildren = 4;
  constexpr int kEach = 100;
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(gate[1]);
      char byte;
      while (::read(gate[0], &byte, 1) > 0) {
      }  // start together: wait until the parent closes the pipe
      try {
        Store store(db, OpenMode::kReadWrite);
        for (int i = 0; i < kEach; ++i) {
          const std::string signature = "child" + std::to_string(c) + "_" + std::to_string(i);
          store.put(make_record(signature, 1.0 + i));
          store.put(
              make_measurement(make_key(signature), "block=" + std::to_string(32 << (i % 4)), "ok", 2.0));
        }
      } catch (const std::exception& error) {
        std::fprintf(stderr, "writer %d: %s\n", c, error.what());
        ::_exit(1);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  for (const pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  Store store(db, OpenMode::kReadOnly);
  const auto records = store.records();
  CHECK(records.size() == kChildren * kEach);
  std::set<std::string> signatures;
  for (const auto& record : records) signatures.insert(record.key.signature);
  CHECK(signatures.size() == kChildren * kEach);
  CHECK(store.measurements(make_key("child3_99"), {make_key("child3_99").template_hash}).size() == 1);
  CHECK(store.measurements(make_key("child0_0"), {make_key("child0_0").template_hash}).size() == 1);
}
