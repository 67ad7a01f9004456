#include "campaign/metric.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>

namespace rackprof::campaign {

struct MetricExpr {
    enum class Kind { kNumber, kCounter, kMetric, kAdd, kSub, kMul, kDiv, kNeg };
    Kind kind = Kind::kNumber;
    double number = 0;
    PrimaryCounter counter = PrimaryCounter::kCyccnt;
    std::string metric;
    std::shared_ptr<const MetricExpr> left, right;
};

namespace {

using Expr = std::shared_ptr<const MetricExpr>;

// Recursive descent over one formula: sum := product (('+'|'-') product)*,
// product := unary (('*'|'/') unary)*, unary := '-' unary | atom,
// atom := number | name | '(' sum ')'.
class Parser {
  public:
    Parser(std::string_view text, int line) : text_(text), line_(line) {}

    Expr parse() {
        Expr e = sum();
        skip();
        if (pos_ != text_.size()) fail("unexpected '" + std::string(text_.substr(pos_, 1)) + "'");
        return e;
    }

  private:
    [[noreturn]] void fail(const std::string& message) const { throw MetricError(line_, message); }
    void skip() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    bool take(char c) {
        skip();
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    static Expr node(MetricExpr::Kind kind, Expr l, Expr r = nullptr) {
        auto e = std::make_shared<MetricExpr>();
        e->kind = kind;
        e->left = std::move(l);
        e->right = std::move(r);
        return e;
    }
    Expr sum() {
        Expr e = product();
        for (;;) {
            if (take('+')) {
                e = node(MetricExpr::Kind::kAdd, e, product());
            } else if (take('-')) {
                e = node(MetricExpr::Kind::kSub, e, product());
            } else {
                return e;
            }
        }
    }
    Expr product() {
        Expr e = unary();
        for (;;) {
            if (take('*')) {
                e = node(MetricExpr::Kind::kMul, e, unary());
            } else if (take('/')) {
                e = node(MetricExpr::Kind::kDiv, e, unary());
            } else {
                return e;
            }
        }
    }
    Expr unary() {
        if (take('-')) return node(MetricExpr::Kind::kNeg, unary());
        return atom();
    }
    Expr atom() {
        skip();
        if (take('(')) {
            Expr e = sum();
            if (!take(')')) fail("missing ')'");
            return e;
        }
        if (pos_ >= text_.size()) fail("a formula ends where a value is expected");
        const char c = text_[pos_];
        auto e = std::make_shared<MetricExpr>();
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
            const std::string rest(text_.substr(pos_));
            char* end = nullptr;
            e->number = std::strtod(rest.c_str(), &end);
            pos_ += static_cast<std::size_t>(end - rest.c_str());
            e->kind = MetricExpr::Kind::kNumber;
            return e;
        }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            const std::size_t start = pos_;
            while (pos_ < text_.size() &&
                   (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
                ++pos_;
            const std::string name(text_.substr(start, pos_ - start));
            if (const auto counter = counter_by_name(name)) {
                e->kind = MetricExpr::Kind::kCounter;
                e->counter = *counter;
            } else {
                e->kind = MetricExpr::Kind::kMetric;
                e->metric = name;
            }
            return e;
        }
        fail("unexpected '" + std::string(1, c) + "'");
    }

    std::string_view text_;
    int line_;
    std::size_t pos_ = 0;
};

bool valid_name(std::string_view name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

void collect_metrics(const MetricExpr& e, std::vector<std::string>& out) {
    if (e.kind == MetricExpr::Kind::kMetric) {
        if (std::find(out.begin(), out.end(), e.metric) == out.end()) out.push_back(e.metric);
    }
    if (e.left) collect_metrics(*e.left, out);
    if (e.right) collect_metrics(*e.right, out);
}

bool is_constant(const MetricExpr& e) {
    switch (e.kind) {
        case MetricExpr::Kind::kNumber:
            return true;
        case MetricExpr::Kind::kCounter:
        case MetricExpr::Kind::kMetric:
            return false;
        default:
            return is_constant(*e.left) && (!e.right || is_constant(*e.right));
    }
}

}  // namespace

MetricSet MetricSet::builtin() {
    MetricSet set;
    set.add(R"(monotone cycles = CYCCNT
monotone instructions = CYCCNT - CPICNT - EXCCNT - SLEEPCNT - LSUCNT + FOLDCNT
monotone stall_cycles = CPICNT + LSUCNT
monotone sleep_cycles = SLEEPCNT
cpi = CYCCNT / instructions
stall_fraction = stall_cycles / CYCCNT
)");
    return set;
}

void MetricSet::add(std::string_view text) {
    std::map<std::string, Metric, std::less<>> added;
    int line_no = 0;
    while (!text.empty()) {
        ++line_no;
        const std::size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        if (const std::size_t hash = line.find('#'); hash != std::string_view::npos)
            line = line.substr(0, hash);
        line = trim(line);
        if (line.empty()) continue;
        const std::size_t eq = line.find('=');
        if (eq == std::string_view::npos) throw MetricError(line_no, "expected NAME = FORMULA");
        Metric m;
        m.line = line_no;
        std::string_view head = trim(line.substr(0, eq));
        if (head.starts_with("monotone") && head.size() > 8 &&
            std::isspace(static_cast<unsigned char>(head[8]))) {
            m.monotone = true;
            head = trim(head.substr(8));
        }
        if (!valid_name(head))
            throw MetricError(line_no, "'" + std::string(head) + "' is not a metric name");
        m.name = std::string(head);
        if (counter_by_name(m.name))
            throw MetricError(line_no, "'" + m.name + "' is a primary counter");
        if (metrics_.count(m.name) || added.count(m.name))
            throw MetricError(line_no, "'" + m.name + "' is defined twice");
        m.formula = std::string(trim(line.substr(eq + 1)));
        m.expr = Parser(m.formula, line_no).parse();
        collect_metrics(*m.expr, m.depends_on);
        added.emplace(m.name, std::move(m));
    }
    auto before = metrics_;
    metrics_.merge(added);
    try {
        resolve();
    } catch (...) {
        metrics_ = std::move(before);
        throw;
    }
}

// Checks every name, finds cycles, computes each metric's primaries and checks monotone flags.
void MetricSet::resolve() {
    enum class Mark { kNone, kVisiting, kDone };
    std::map<std::string, Mark, std::less<>> marks;
    std::vector<std::string> chain;
    // Whether `e` is additive over monotone terms: constants times counters and monotone
    // metrics, summed (a difference of counts is allowed: `instructions` is one).
    std::function<bool(const MetricExpr&)> additive = [&](const MetricExpr& e) -> bool {
        switch (e.kind) {
            case MetricExpr::Kind::kNumber:
            case MetricExpr::Kind::kCounter:
                return true;
            case MetricExpr::Kind::kMetric:
                return metrics_.find(e.metric)->second.monotone;
            case MetricExpr::Kind::kAdd:
            case MetricExpr::Kind::kSub:
                return additive(*e.left) && additive(*e.right);
            case MetricExpr::Kind::kNeg:
                return additive(*e.left);
            case MetricExpr::Kind::kMul:
                return (is_constant(*e.left) && additive(*e.right)) ||
                       (is_constant(*e.right) && additive(*e.left));
            case MetricExpr::Kind::kDiv:
                return is_constant(*e.right) && additive(*e.left);
        }
        return false;
    };
    std::function<void(Metric&)> visit = [&](Metric& m) {
        Mark& mark = marks[m.name];
        if (mark == Mark::kDone) return;
        if (mark == Mark::kVisiting) {
            std::string path;
            auto start = std::find(chain.begin(), chain.end(), m.name);
            for (auto it = start; it != chain.end(); ++it) path += *it + " -> ";
            throw MetricError(m.line, "'" + m.name + "' depends on itself: " + path + m.name);
        }
        mark = Mark::kVisiting;
        chain.push_back(m.name);
        CounterMask primaries = 0;
        std::function<void(const MetricExpr&)> walk = [&](const MetricExpr& e) {
            if (e.kind == MetricExpr::Kind::kCounter) primaries |= mask_of(e.counter);
            if (e.kind == MetricExpr::Kind::kMetric) {
                auto it = metrics_.find(e.metric);
                if (it == metrics_.end())
                    throw MetricError(m.line, "'" + m.name + "' uses '" + e.metric +
                                                  "', which is neither a metric nor a counter");
                visit(it->second);
                primaries |= it->second.primaries;
            }
            if (e.left) walk(*e.left);
            if (e.right) walk(*e.right);
        };
        walk(*m.expr);
        m.primaries = primaries;
        if (m.monotone && !additive(*m.expr))
            throw MetricError(m.line, "'" + m.name +
                                          "' cannot be monotone: it is not a sum of counters "
                                          "and monotone metrics (a ratio or product of counts "
                                          "does not bound a callee by its callers)");
        chain.pop_back();
        mark = Mark::kDone;
    };
    for (auto& [name, m] : metrics_) visit(m);
}

const Metric* MetricSet::find(std::string_view name) const {
    const auto it = metrics_.find(name);
    return it == metrics_.end() ? nullptr : &it->second;
}

const Metric& MetricSet::get(std::string_view name) const {
    if (const Metric* m = find(name)) return *m;
    if (const auto counter = counter_by_name(name)) {
        // A primary counter as a metric of its own: kept so that references stay valid.
        static const MetricSet primaries = [] {
            MetricSet s;
            for (int i = 0; i < kPrimaryCounters; ++i) {
                const std::string n = counter_name(static_cast<PrimaryCounter>(i));
                Metric m;
                m.name = n;
                m.formula = n;
                m.monotone = true;
                m.primaries = static_cast<CounterMask>(1u << i);
                auto e = std::make_shared<MetricExpr>();
                e->kind = MetricExpr::Kind::kCounter;
                e->counter = static_cast<PrimaryCounter>(i);
                m.expr = e;
                s.metrics_.emplace(n, std::move(m));
            }
            return s;
        }();
        return *primaries.find(counter_name(*counter));
    }
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw MetricError(0, "unknown metric '" + std::string(name) + "' (defined: " + known +
                             ", or a primary counter: " + mask_names(0x3F) + ")");
}

double MetricSet::evaluate(const Metric& metric, const CounterValues& counts) const {
    return eval(*metric.expr, counts);
}

double MetricSet::eval(const MetricExpr& e, const CounterValues& counts) const {
    switch (e.kind) {
        case MetricExpr::Kind::kNumber:
            return e.number;
        case MetricExpr::Kind::kCounter:
            return static_cast<double>(counts[static_cast<std::size_t>(e.counter)]);
        case MetricExpr::Kind::kMetric:
            return eval(*metrics_.find(e.metric)->second.expr, counts);
        case MetricExpr::Kind::kAdd:
            return eval(*e.left, counts) + eval(*e.right, counts);
        case MetricExpr::Kind::kSub:
            return eval(*e.left, counts) - eval(*e.right, counts);
        case MetricExpr::Kind::kMul:
            return eval(*e.left, counts) * eval(*e.right, counts);
        case MetricExpr::Kind::kNeg:
            return -eval(*e.left, counts);
        case MetricExpr::Kind::kDiv: {
            const double d = eval(*e.right, counts);
            return d == 0 ? std::numeric_limits<double>::quiet_NaN() : eval(*e.left, counts) / d;
        }
    }
    return std::numeric_limits<double>::quiet_NaN();
}

std::vector<std::string> MetricSet::names() const {
    std::vector<std::string> out;
    for (const auto& [name, m] : metrics_) out.push_back(name);
    return out;
}

}  // namespace rackprof::campaign
