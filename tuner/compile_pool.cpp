// Batches are sized so every thread gets about two programs: enough to balance, few enough to share front-end work.
#include "tuner/compile_pool.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "tuner/tuner.hpp"

namespace jitune::tuner {

std::optional<CompileMemo::Hit> CompileMemo::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = units_.find(key);
  if (it == units_.end()) return std::nullopt;
  return it->second;
}

void CompileMemo::add(const std::vector<std::string>& keys, std::shared_ptr<const CompiledProgram> program) {
  if (!program || !program->ok) return;
  std::lock_guard lock(mutex_);
  const std::size_t bytes = program->cubin.size() + program->log.size();
  if (bytes_ + bytes > max_bytes_) {
    units_.clear();
    bytes_ = 0;
  }
  bytes_ += bytes;
  for (std::size_t u = 0; u < keys.size(); ++u) units_.insert_or_assign(keys[u], Hit{program, u});
}

std::vector<std::string> CompileMemo::claim(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> got;
  for (const std::string& key : keys)
    if (!units_.contains(key) && in_flight_.insert(key).second) got.push_back(key);
  return got;
}

bool CompileMemo::in_flight(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return in_flight_.contains(key);
}

void CompileMemo::landed(const std::vector<std::string>& keys) {
  {
    std::lock_guard lock(mutex_);
    for (const std::string& key : keys) in_flight_.erase(key);
  }
  landed_.notify_all();
}

std::optional<CompileMemo::Hit> CompileMemo::await(const std::string& key) const {
  std::unique_lock lock(mutex_);
  landed_.wait(lock, [&] { return !in_flight_.contains(key); });
  auto it = units_.find(key);
  if (it == units_.end()) return std::nullopt;
  return it->second;
}

std::size_t CompileMemo::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

std::size_t CompileMemo::units() const {
  std::lock_guard lock(mutex_);
  return units_.size();
}

namespace {

// NVRTC for one program, through the memo's shared folder when it has one (SharedCompiles).
CompiledProgram compile_program(const Compiler& compiler, const std::string& program,
                                const std::vector<std::string>& names, const std::string& arch, bool resource_report,
                                const CompileMemo* memo) {
  const auto run = [&] { return compiler.compile(program, names, arch, resource_report); };
  SharedCompiles* shared = memo ? memo->shared() : nullptr;
  if (shared == nullptr) return run();
  return shared->get(SharedCompiles::key(compiler, program, names, arch, resource_report), run);
}

// The candidates of one program text grouped by name expression: each unit is one kernel to compile.
struct ProgramUnits {
  std::vector<std::string> names;                 // per unit
  std::vector<std::vector<std::size_t>> members;  // per unit: indices into the pool's config list
  std::map<std::string, std::size_t> index;       // name expression -> unit
};

// Every candidate's unit, by program text, with the programs in order of first appearance.
struct Grouped {
  std::map<std::string, ProgramUnits> programs;
  std::vector<std::string> order;
  std::size_t units = 0;
};

// Groups by program text, then by name expression within a program.
Grouped group_candidates(const Family& family, const Problem& problem, const std::vector<Config>& configs) {
  Grouped grouped;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    KernelSource src = family.source(problem, configs[i]);
    auto [git, new_program] = grouped.programs.try_emplace(src.program);
    if (new_program) grouped.order.push_back(src.program);
    ProgramUnits& g = git->second;
    auto [nit, new_name] = g.index.try_emplace(src.name_expression, g.names.size());
    if (new_name) {
      g.names.push_back(src.name_expression);
      g.members.emplace_back();
      ++grouped.units;
    }
    g.members[nit->second].push_back(i);
  }
  return grouped;
}

// A batch of units [b, e) of one program.
CompiledBatch make_batch(const std::string& program, const ProgramUnits& g, std::size_t b, std::size_t e) {
  CompiledBatch part;
  part.program = program;
  for (std::size_t u = b; u < e; ++u)
    for (std::size_t i : g.members[u]) {
      part.candidates.push_back(i);
      part.name_expressions.push_back(g.names[u]);
      part.unit.push_back(u - b);
    }
  return part;
}

// The units `which` of `g` (indices into it), in that order.
ProgramUnits subset(const ProgramUnits& g, const std::vector<std::size_t>& which) {
  ProgramUnits out;
  for (std::size_t u : which) {
    out.index.emplace(g.names[u], out.names.size());
    out.names.push_back(g.names[u]);
    out.members.push_back(g.members[u]);
  }
  return out;
}

// The name expressions of a batch, one per unit, in unit order.
std::vector<std::string> unit_names(const CompiledBatch& batch) {
  std::vector<std::string> names;
  for (std::size_t k = 0; k < batch.candidates.size(); ++k)
    if (batch.unit[k] == names.size()) names.push_back(batch.name_expressions[k]);
  return names;
}

struct MemoHits {
  std::vector<CompiledBatch> batches;  // ready: one per kept program
  std::size_t reused = 0;              // candidates they hold
  bool probed = false;                 // the default config (index 0) is among them: it is known to compile
};

// Units an earlier pool compiled: one ready batch per kept program, and they leave `grouped`.
MemoHits take_memo_hits(const CompileMemo& memo, const Compiler& compiler, const std::string& arch,
                        Grouped& grouped) {
  MemoHits out;
  std::map<const CompiledProgram*, CompiledBatch> hits;
  std::size_t hit_units = 0;
  for (const std::string& program : grouped.order) {
    ProgramUnits& g = grouped.programs[program];
    ProgramUnits rest;
    for (std::size_t u = 0; u < g.names.size(); ++u) {
      auto hit = memo.find(compiler.binary_key(program, g.names[u], arch));
      if (!hit) {
        rest.index.emplace(g.names[u], rest.names.size());
        rest.names.push_back(g.names[u]);
        rest.members.push_back(std::move(g.members[u]));
        continue;
      }
      CompiledBatch& b = hits[hit->program.get()];
      b.program = program;
      b.output = hit->program;
      for (std::size_t i : g.members[u]) {
        b.candidates.push_back(i);
        b.name_expressions.push_back(g.names[u]);
        b.unit.push_back(hit->unit);
      }
      out.reused += g.members[u].size();
      ++hit_units;
      if (std::find(g.members[u].begin(), g.members[u].end(), std::size_t{0}) != g.members[u].end())
        out.probed = true;
    }
    g = std::move(rest);
  }
  for (auto& [ptr, b] : hits) out.batches.push_back(std::move(b));
  grouped.units -= hit_units;
  std::erase_if(grouped.order, [&](const std::string& program) { return grouped.programs[program].names.empty(); });
  return out;
}

}  // namespace

CompilePool::CompilePool(const Compiler& compiler, const Family& family, const Problem& problem,
                         const std::vector<Config>& configs, std::string arch, unsigned threads,
                         bool resource_report, CompileMemo* memo, bool probe_first)
    : compiler_(compiler), arch_(std::move(arch)), resource_report_(resource_report), memo_(memo) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  Grouped grouped = group_candidates(family, problem, configs);
  bool probed = !probe_first;  // also set when the default config's unit came from the memo: it is known to compile
  if (memo_) {
    MemoHits hits = take_memo_hits(*memo_, compiler_, arch_, grouped);
    reused_ = hits.reused;
    probed = probed || hits.probed;
    for (CompiledBatch& b : hits.batches) done_.push_back(std::move(b));
  }
  std::deque<Work> work, waits;
  const std::size_t per_batch = std::clamp<std::size_t>((grouped.units + 2 * threads - 1) / (2 * threads), 1, 24);
  for (const std::string& program : grouped.order) {
    const ProgramUnits& g = grouped.programs[program];
    std::size_t first = 0;
    if (!probed) {
      // The first unit holds configs[0]: compile it alone, now, as the probe (or wait for the prefetch's compile).
      CompiledBatch probe = make_batch(program, g, 0, 1);
      std::optional<CompileMemo::Hit> hit;
      if (memo_) {
        const std::string key = compiler_.binary_key(program, g.names[0], arch_);
        if (memo_->claim({key}).empty()) hit = memo_->await(key);
      }
      if (hit) {
        probe.output = hit->program;
        for (std::size_t& u : probe.unit) u = hit->unit;
        reused_ += probe.candidates.size();
        done_.push_back(std::move(probe));
      } else {
        compile_batch(std::move(probe));
        const CompiledBatch& done = done_.back();
        if (!done.output->ok)
          throw CompileError("NVRTC cannot compile " + std::string(family.name()) + " " + problem.signature() +
                                 " even with its default config " + configs[0].text() + ":\n" + done.output->log,
                             std::string(family.name()), configs[0].text(), done.output->options, done.output->log);
      }
      probed = true;
      first = 1;
    }
    // This pool compiles the units it claims in the memo; the others are in flight there and are waited for last.
    std::vector<std::size_t> mine, theirs;
    if (memo_) {
      std::vector<std::string> keys;
      for (std::size_t u = first; u < g.names.size(); ++u)
        keys.push_back(compiler_.binary_key(program, g.names[u], arch_));
      const std::vector<std::string> got = memo_->claim(keys);
      const std::set<std::string> claimed(got.begin(), got.end());
      for (std::size_t u = first; u < g.names.size(); ++u)
        (claimed.contains(keys[u - first]) ? mine : theirs).push_back(u);
    } else {
      for (std::size_t u = first; u < g.names.size(); ++u) mine.push_back(u);
    }
    const ProgramUnits own = subset(g, mine);
    for (std::size_t b = 0; b < own.names.size(); b += per_batch)
      work.push_back({make_batch(program, own, b, std::min(own.names.size(), b + per_batch)), false});
    if (!theirs.empty()) waits.push_back({make_batch(program, subset(g, theirs), 0, theirs.size()), true});
  }
  for (Work& w : waits) work.push_back(std::move(w));
  todo_ = std::move(work);
  outstanding_ = todo_.size() + done_.size();
  threads = std::min<unsigned>(threads, std::max<std::size_t>(1, todo_.size()));
  for (unsigned t = 0; t < threads; ++t) threads_.emplace_back([this] { this->work(); });
}

CompilePool::~CompilePool() {
  std::vector<std::string> unstarted;  // claimed in the memo by this pool, never compiled: others may compile them
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    for (const Work& w : todo_)
      if (!w.await && memo_)
        for (const std::string& name : unit_names(w.batch))
          unstarted.push_back(compiler_.binary_key(w.batch.program, name, arch_));
    todo_.clear();
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
  if (memo_) memo_->landed(unstarted);
}

void CompilePool::work() {
  while (true) {
    Work w;
    {
      std::lock_guard lock(mutex_);
      if (stop_ || todo_.empty()) return;
      w = std::move(todo_.front());
      todo_.pop_front();
    }
    if (w.await)
      await_batch(std::move(w.batch));
    else
      compile_batch(std::move(w.batch));
  }
}

void CompilePool::await_batch(CompiledBatch batch) {
  const std::vector<std::string> names = unit_names(batch);
  std::vector<std::optional<CompileMemo::Hit>> hits;
  for (const std::string& name : names) hits.push_back(memo_->await(compiler_.binary_key(batch.program, name, arch_)));
  // Units whose compile landed, one ready batch per kept program; the rest (their compile failed) compiled here.
  std::map<const CompiledProgram*, CompiledBatch> ready;
  CompiledBatch rest;
  rest.program = batch.program;
  std::vector<std::size_t> rest_unit(names.size(), SIZE_MAX);
  std::size_t rest_units = 0, reused = 0;
  for (std::size_t k = 0; k < batch.candidates.size(); ++k) {
    const std::size_t u = batch.unit[k];
    if (hits[u]) {
      CompiledBatch& b = ready[hits[u]->program.get()];
      b.program = batch.program;
      b.output = hits[u]->program;
      b.candidates.push_back(batch.candidates[k]);
      b.name_expressions.push_back(batch.name_expressions[k]);
      b.unit.push_back(hits[u]->unit);
      ++reused;
      continue;
    }
    if (rest_unit[u] == SIZE_MAX) rest_unit[u] = rest_units++;
    rest.candidates.push_back(batch.candidates[k]);
    rest.name_expressions.push_back(batch.name_expressions[k]);
    rest.unit.push_back(rest_unit[u]);
  }
  if (rest_units > 0) {
    std::vector<std::string> keys;
    for (const std::string& name : unit_names(rest)) keys.push_back(compiler_.binary_key(rest.program, name, arch_));
    memo_->claim(keys);  // compiled here whatever the claim says: landed by compile_batch
  }
  reused_ += reused;
  {
    std::lock_guard lock(mutex_);
    outstanding_ += ready.size() + (rest_units > 0 ? 1 : 0) - 1;
    for (auto& [program, b] : ready) done_.push_back(std::move(b));
  }
  ready_.notify_all();
  if (rest_units > 0) compile_batch(std::move(rest));
}

void CompilePool::compile_batch(CompiledBatch batch) {
  const std::vector<std::string> names = unit_names(batch);
  std::vector<std::string> keys;
  if (memo_)
    for (const std::string& name : names) keys.push_back(compiler_.binary_key(batch.program, name, arch_));
  CompiledProgram out;
  try {
    out = compile_program(compiler_, batch.program, names, arch_, resource_report_, memo_);
  } catch (const std::exception& e) {
    out.ok = false;
    out.log = e.what();
  }
  if (!out.ok && names.size() > 1) {
    // One bad instantiation fails the whole program: retry name by name so each config gets its own verdict.
    std::vector<CompiledBatch> singles(names.size());
    for (std::size_t k = 0; k < batch.candidates.size(); ++k) {
      CompiledBatch& s = singles[batch.unit[k]];
      s.program = batch.program;
      s.candidates.push_back(batch.candidates[k]);
      s.name_expressions.push_back(batch.name_expressions[k]);
      s.unit.push_back(0);
    }
    {
      std::lock_guard lock(mutex_);
      seconds_ += out.seconds;
      outstanding_ += singles.size() - 1;
    }
    for (auto& s : singles) compile_batch(std::move(s));
    if (memo_) memo_->landed(keys);
    return;
  }
  batch.output = std::make_shared<const CompiledProgram>(std::move(out));
  if (memo_ && batch.output->ok) memo_->add(keys, batch.output);
  if (memo_) memo_->landed(keys);
  {
    std::lock_guard lock(mutex_);
    seconds_ += batch.output->seconds;
    done_.push_back(std::move(batch));
  }
  ready_.notify_all();
}

std::optional<CompiledBatch> CompilePool::next() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return !done_.empty() || outstanding_ == 0; });
  if (done_.empty()) return std::nullopt;
  CompiledBatch b = std::move(done_.front());
  done_.pop_front();
  --outstanding_;
  return b;
}

double CompilePool::compile_seconds() const {
  std::lock_guard lock(mutex_);
  return seconds_;
}

CompilePrefetch::CompilePrefetch(const Compiler& compiler, const DeviceInfo& device, CompileMemo& memo,
                                 std::vector<Job> jobs, unsigned threads, bool resource_report, std::size_t first_job,
                                 std::function<bool(std::size_t)> skip)
    : compiler_(compiler), device_(device), arch_(device.arch()), memo_(memo), jobs_(std::move(jobs)),
      resource_report_(resource_report), skip_(std::move(skip)), next_job_(first_job), first_job_(first_job) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
}

CompilePrefetch::~CompilePrefetch() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    todo_.clear();
  }
  changed_.notify_all();
  for (auto& t : threads_) t.join();
}

void CompilePrefetch::starting(std::size_t job) {
  std::lock_guard lock(mutex_);
  first_job_ = std::max(first_job_, job + 1);
  next_job_ = std::max(next_job_, first_job_);
  std::erase_if(todo_, [&](const Batch& b) { return b.job < first_job_; });
}

void CompilePrefetch::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    return stop_ || full_ || (todo_.empty() && !expanding_ && compiling_ == 0 && next_job_ >= jobs_.size());
  });
}

double CompilePrefetch::compile_seconds() const {
  std::lock_guard lock(mutex_);
  return seconds_;
}

std::size_t CompilePrefetch::units() const {
  std::lock_guard lock(mutex_);
  return units_;
}

// Turns the next job into batches of the units the memo does not hold yet. Called with the lock held by one thread at
// a time; the candidate list and program texts are built without it.
bool CompilePrefetch::expand_next(std::unique_lock<std::mutex>& lock) {
  if (next_job_ >= jobs_.size()) return false;
  const std::size_t job = next_job_++;
  const Job j = jobs_[job];
  expanding_ = true;
  lock.unlock();
  std::vector<Batch> batches;
  const bool skipped = skip_ && skip_(job);  // another process tunes it
  try {
    std::size_t pruned = 0;
    std::map<std::string, std::vector<std::string>> by_program;  // program text -> name expressions, in order
    std::vector<std::string> order;
    const std::vector<Config> configs =
        skipped ? std::vector<Config>{} : legal_candidates(*j.family, *j.problem, device_, pruned);
    for (const Config& c : configs) {
      KernelSource src = j.family->source(*j.problem, c);
      auto [it, fresh] = by_program.try_emplace(src.program);
      if (fresh) order.push_back(src.program);
      auto& names = it->second;
      if (std::find(names.begin(), names.end(), src.name_expression) == names.end() &&
          !memo_.find(compiler_.binary_key(src.program, src.name_expression, arch_)))
        names.push_back(std::move(src.name_expression));
    }
    // Eight instantiations a program: the front end's work is shared, and a batch stays short enough to drop.
    constexpr std::size_t kPerBatch = 8;
    for (const std::string& program : order) {
      const auto& names = by_program[program];
      for (std::size_t b = 0; b < names.size(); b += kPerBatch)
        batches.push_back({job, program,
                           std::vector<std::string>(names.begin() + static_cast<std::ptrdiff_t>(b),
                                                    names.begin() + static_cast<std::ptrdiff_t>(
                                                                        std::min(names.size(), b + kPerBatch)))});
    }
  } catch (const std::exception&) {
    // A problem the prefetch cannot enumerate is left to its session, which reports why.
    batches.clear();
  }
  lock.lock();
  expanding_ = false;
  if (job >= first_job_)
    for (Batch& b : batches) todo_.push_back(std::move(b));
  changed_.notify_all();
  return true;
}

void CompilePrefetch::work() {
  background_priority();
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (todo_.empty()) {
      if (!expanding_ && expand_next(lock)) continue;
      if (!expanding_ && next_job_ >= jobs_.size()) {  // nothing left to expand or compile
        changed_.notify_all();
        return;
      }
      changed_.wait(lock);
      continue;
    }
    if (memo_.bytes() > memo_.max_bytes() / 4 * 3) {  // the sessions' own pools take over from here
      full_ = true;
      changed_.notify_all();
      return;
    }
    Batch batch = std::move(todo_.front());
    todo_.pop_front();
    ++compiling_;
    lock.unlock();
    // Only the units nobody has compiled or started since the batch was made (a session's pool may hold some).
    std::vector<std::string> keys;
    for (const std::string& name : batch.names) keys.push_back(compiler_.binary_key(batch.program, name, arch_));
    const std::vector<std::string> got = memo_.claim(keys);
    if (got.size() < keys.size()) {
      std::vector<std::string> names;
      for (std::size_t u = 0; u < keys.size(); ++u)
        if (std::find(got.begin(), got.end(), keys[u]) != got.end()) names.push_back(batch.names[u]);
      batch.names = std::move(names);
      keys = got;
    }
    CompiledProgram out;
    if (!batch.names.empty()) {
      try {
        out = compile_program(compiler_, batch.program, batch.names, arch_, resource_report_, &memo_);
      } catch (const std::exception&) {
        out.ok = false;
      }
    }
    const double seconds = out.seconds;
    const bool ok = out.ok && !batch.names.empty();
    if (ok) memo_.add(keys, std::make_shared<const CompiledProgram>(std::move(out)));
    memo_.landed(keys);
    lock.lock();
    --compiling_;
    seconds_ += seconds;
    if (ok) units_ += batch.names.size();
    changed_.notify_all();
  }
}

}  // namespace jitune::tuner
