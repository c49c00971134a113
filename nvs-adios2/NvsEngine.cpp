/* nvs-adios2: the engine (see NvsEngine.h for what it stores and its parameters). */
#include "NvsEngine.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include <chrono>
#include <cmath>
#include <complex>
#include <fcntl.h>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace nvs_adios2
{

namespace
{

const char *const kStepIndex = "__adios2_step";

/* The numpy type string of each ADIOS2 type the engine stores (x86-64/aarch64 Linux:
 * little-endian, long double stored as its 16 bytes). */
template <class T>
struct DType;
#define NVS_DTYPES(X)                                                                              \
    X(char, "|S1")                                                                                 \
    X(int8_t, "|i1")                                                                               \
    X(int16_t, "<i2")                                                                              \
    X(int32_t, "<i4")                                                                              \
    X(int64_t, "<i8")                                                                              \
    X(uint8_t, "|u1")                                                                              \
    X(uint16_t, "<u2")                                                                             \
    X(uint32_t, "<u4")                                                                             \
    X(uint64_t, "<u8")                                                                             \
    X(float, "<f4")                                                                                \
    X(double, "<f8")                                                                               \
    X(long double, "<f16")                                                                         \
    X(std::complex<float>, "<c8")                                                                  \
    X(std::complex<double>, "<c16")
#define X(T, S)                                                                                    \
    template <>                                                                                    \
    struct DType<T>                                                                                \
    {                                                                                              \
        static const char *str() { return S; }                                                     \
    };
NVS_DTYPES(X)
#undef X

/* `error`: the failed call's message, nvs_last_error() of the thread that made it. */
[[noreturn]] void Fail(const std::string &what, int32_t rc, const std::string &error)
{
    throw std::runtime_error("nvs engine: " + what + ": " + nvs_status_name(rc) + ": " + error);
}

[[noreturn]] void Fail(const std::string &what, int32_t rc) { Fail(what, rc, nvs_last_error()); }

std::string DimsText(const adios2::Dims &d);

/* The bytes of an array of `shape` with `esz`-byte elements; a shape too large for this
 * address space is an error naming `what` (a product that wraps would size a buffer too
 * small for what is copied into it). */
size_t Bytes(const adios2::Dims &shape, size_t esz, const std::string &what)
{
    size_t n = esz;
    for (size_t x : shape)
        if (__builtin_mul_overflow(n, x, &n))
            throw std::invalid_argument("nvs engine: " + what + ": a shape of {" + DimsText(shape) +
                                        "} does not fit in memory");
    return n;
}

std::string DimsText(const adios2::Dims &d)
{
    std::string s;
    for (size_t i = 0; i < d.size(); ++i)
        s += (i ? "," : "") + std::to_string(d[i]);
    return s;
}

/* A whole decimal number (no sign, no spaces, no suffix) that fits in 64 bits. */
bool ParseU64(const std::string &s, uint64_t &v)
{
    if (s.empty() || s.size() > 20)
        return false;
    v = 0;
    for (char c : s)
        if (c < '0' || c > '9' || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(c - '0'), &v))
            return false;
    return true;
}

/* A shape as the step index writes it ("d0,d1,..."); false if it is not one. */
bool ParseDims(const std::string &s, adios2::Dims &d)
{
    d.clear();
    if (s.empty())
        return true;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ','))
    {
        uint64_t v = 0;
        if (!ParseU64(part, v))
            return false;
        d.push_back(v);
    }
    return s.back() != ',';
}

/* Copy the box [boxStart, boxStart+count) (global coordinates, row-major) from src,
 * an array of extents srcExt placed at srcOrigin, into dst (dstExt at dstOrigin). */
void CopyBox(size_t esz, const adios2::Dims &boxStart, const adios2::Dims &count, const char *src,
             const adios2::Dims &srcOrigin, const adios2::Dims &srcExt, char *dst,
             const adios2::Dims &dstOrigin, const adios2::Dims &dstExt)
{
    const size_t n = count.size();
    if (n == 0)
    {
        std::memcpy(dst, src, esz);
        return;
    }
    for (size_t c : count)
        if (c == 0)
            return;
    adios2::Dims idx(n, 0); // offsets within the box
    const size_t run = count[n - 1] * esz;
    for (;;)
    {
        size_t so = 0, doff = 0;
        for (size_t d = 0; d < n; ++d)
        {
            so = so * srcExt[d] + (boxStart[d] + idx[d] - srcOrigin[d]);
            doff = doff * dstExt[d] + (boxStart[d] + idx[d] - dstOrigin[d]);
        }
        std::memcpy(dst + doff * esz, src + so * esz, run);
        // next row: increment idx over dimensions 0..n-2
        size_t d = n - 1;
        for (;;)
        {
            if (d == 0)
                return;
            --d;
            if (++idx[d] < count[d])
                break;
            idx[d] = 0;
        }
    }
}

void CheckBox(const std::string &name, const adios2::Dims &start, const adios2::Dims &count,
              const adios2::Dims &shape)
{
    if (start.size() != shape.size() || count.size() != shape.size())
        throw std::invalid_argument("nvs engine: variable " + name + ": selection of " +
                                    std::to_string(count.size()) + " dimensions, shape has " +
                                    std::to_string(shape.size()));
    for (size_t d = 0; d < shape.size(); ++d)
        if (start[d] > shape[d] || count[d] > shape[d] - start[d]) // start + count may wrap
            throw std::invalid_argument("nvs engine: variable " + name + ": selection start {" +
                                        DimsText(start) + "} count {" + DimsText(count) +
                                        "} outside shape {" + DimsText(shape) + "}");
}

uint64_t ParseSize(const std::string &s)
{
    size_t digits = 0;
    while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9')
        ++digits;
    const std::string suf = s.substr(digits);
    int shift = -1;
    if (suf.empty())
        shift = 0;
    else if (suf == "K" || suf == "k")
        shift = 10;
    else if (suf == "M" || suf == "m")
        shift = 20;
    else if (suf == "G" || suf == "g")
        shift = 30;
    else if (suf == "T" || suf == "t")
        shift = 40;
    uint64_t v = 0;
    if (shift < 0 || !ParseU64(s.substr(0, digits), v))
        throw std::invalid_argument("nvs engine: PoolSize \"" + s +
                                    "\": not a size (N, NK, NM, NG or NT bytes)");
    if (shift > 0 && v > (UINT64_MAX >> shift))
        throw std::invalid_argument("nvs engine: PoolSize \"" + s + "\": too large");
    return v << shift;
}

/* A yes/no parameter: true/false, on/off, yes/no, 1/0, in any case. */
bool ParseBool(const std::string &key, const std::string &s)
{
    std::string l;
    for (char c : s)
        l += (char)std::tolower((unsigned char)c);
    if (l == "true" || l == "on" || l == "yes" || l == "1")
        return true;
    if (l == "false" || l == "off" || l == "no" || l == "0")
        return false;
    throw std::invalid_argument("nvs engine: " + key + " \"" + s + "\": not true or false");
}

/* Seconds: a number; negative or infinite means as long as it takes (returned as -1), and
 * so does a wait too long for the clock (over a century). */
double ParseSeconds(const std::string &key, const std::string &s)
{
    char *end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || std::isnan(v))
        throw std::invalid_argument("nvs engine: " + key + " \"" + s +
                                    "\": not a number of seconds (negative: wait as long as it takes)");
    if (v < 0 || v > 3.2e9)
        return -1;
    return v;
}

/* When a wait of `seconds` (>= 0) started now ends. */
std::chrono::steady_clock::time_point Deadline(double seconds)
{
    return std::chrono::steady_clock::now() +
           std::chrono::milliseconds((int64_t)(seconds * 1000.0));
}

/* A variable name the step index can hold and nvs can store. */
void CheckName(const std::string &name)
{
    if (name.empty())
        throw std::invalid_argument("nvs engine: a variable needs a name");
    if (name.size() > NVS_NAME_MAX)
        throw std::invalid_argument("nvs engine: variable name of " + std::to_string(name.size()) +
                                    " bytes: at most " + std::to_string(NVS_NAME_MAX));
    if (name.find_first_of(std::string("\t\n\0", 3)) != std::string::npos)
        throw std::invalid_argument("nvs engine: variable name \"" + name +
                                    "\": a tab, newline or NUL cannot be part of a name here");
    if (name == kStepIndex)
        throw std::invalid_argument(std::string("nvs engine: the name ") + kStepIndex +
                                    " is the engine's own");
}

} // namespace

namespace
{

/* The PoolPaths this process has opened in Write mode: a second Write of one would
 * replace the first output (the engine cannot tell two outputs from a rerun). */
std::set<std::string> &WrittenPaths()
{
    static std::set<std::string> paths;
    return paths;
}

/* A sentinel block id: while a variable's BlockID() is this, no SetBlockSelection was
 * made since the engine set it. */
const size_t kNoBlock = SIZE_MAX - 7;

std::string Hex(const void *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i)
    {
        const unsigned char c = static_cast<const unsigned char *>(p)[i];
        s += digits[c >> 4];
        s += digits[c & 15];
    }
    return s;
}

bool Unhex(const std::string &s, std::string &out)
{
    out.clear();
    if (s.size() % 2)
        return false;
    for (size_t i = 0; i < s.size(); i += 2)
    {
        int v = 0;
        for (size_t k = i; k < i + 2; ++k)
        {
            const char c = s[k];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return false;
            v = v * 16 + d;
        }
        out += (char)v;
    }
    return true;
}

template <class T>
struct IsComplex : std::false_type
{
};
template <class T>
struct IsComplex<std::complex<T>> : std::true_type
{
};

/* The block's least and greatest elements, as bytes (none for complex numbers, as BP5). */
template <class T>
void Extremes(const T *v, size_t n, Block &b)
{
    if constexpr (!IsComplex<T>::value)
    {
        if (n == 0)
            return;
        T lo = v[0], hi = v[0];
        size_t i = 0;
        if constexpr (sizeof(T) <= 8 && std::is_arithmetic<T>::value)
        {
            // 16-byte vectors of selects (the compiler makes min/max instructions of
            // them), four at a time; the same result as one scan, NaNs included (a NaN is
            // never less: skipped, unless it is the first element)
            typedef T V __attribute__((vector_size(16)));
            constexpr size_t W = 16 / sizeof(T);
            V l[4], h[4];
            for (size_t a = 0; a < 4; ++a)
                for (size_t k = 0; k < W; ++k)
                    l[a][k] = h[a][k] = v[0];
            for (; i + 4 * W <= n; i += 4 * W)
                for (size_t a = 0; a < 4; ++a)
                {
                    V x;
                    std::memcpy(&x, v + i + a * W, sizeof x);
                    l[a] = x < l[a] ? x : l[a];
                    h[a] = h[a] < x ? x : h[a];
                }
            for (size_t a = 0; a < 4; ++a)
                for (size_t k = 0; k < W; ++k)
                {
                    lo = l[a][k] < lo ? l[a][k] : lo;
                    hi = hi < h[a][k] ? h[a][k] : hi;
                }
        }
        for (; i < n; ++i)
        {
            lo = v[i] < lo ? v[i] : lo;
            hi = hi < v[i] ? v[i] : hi;
        }
        b.min.assign(reinterpret_cast<const char *>(&lo), sizeof(T));
        b.max.assign(reinterpret_cast<const char *>(&hi), sizeof(T));
    }
}

std::vector<std::string> Fields(const std::string &line)
{
    std::vector<std::string> f;
    size_t at = 0;
    for (;;)
    {
        const size_t tab = line.find('\t', at);
        f.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
        if (tab == std::string::npos)
            return f;
        at = tab + 1;
    }
}

std::string RankList(const std::vector<uint32_t> &ranks)
{
    std::string s;
    for (size_t i = 0; i < ranks.size(); ++i)
        s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s;
}

/* The ranks whose index of a step is not there (of as many as its lowest rank says). */
std::vector<uint32_t> Missing(const std::map<uint32_t, RankStep> &step)
{
    std::vector<uint32_t> missing;
    for (uint32_t r = 0; r < step.begin()->second.ranks; ++r)
        if (!step.count(r))
            missing.push_back(r);
    return missing;
}

} // namespace

NvsEngine::NvsEngine(adios2::IO io, const std::string &name, const adios2::Mode mode)
: PluginEngineInterface(io, name, mode)
{
#if NVS_ADIOS2_MPI
    // ADIOS2 2.12 never gives a plugin engine its communicator (its plugin engine is built
    // into the serial core, which calls the constructor without one): the writers of an
    // output are taken to be every rank of MPI_COMM_WORLD.
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized && mode != adios2::Mode::Read)
    {
        int rank = 0, size = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        m_Rank = (uint32_t)rank;
        m_Ranks = (uint32_t)size;
    }
#endif
    m_PoolPath = Param("PoolPath", "");
    if (m_PoolPath.empty())
        throw std::invalid_argument("nvs engine: the parameter PoolPath is required (the pool "
                                    "file; the engine does not see the name given to Open: two "
                                    "outputs need two PoolPaths)");
    m_EndStream = ParseBool("EndStream", Param("EndStream", "true"));
    {
        const std::string keep = Param("KeepSteps", "0");
        uint64_t k = 0;
        if (!ParseU64(keep, k) || k > UINT32_MAX)
            throw std::invalid_argument("nvs engine: KeepSteps \"" + keep +
                                        "\": not a number of steps (0: keep every step)");
        m_KeepSteps = (uint32_t)k;
    }
    m_Timeout = ParseSeconds("Timeout", Param("Timeout", "-1"));
    m_OpenTimeout = ParseSeconds("OpenTimeout", Param("OpenTimeout", "60"));
    switch (mode)
    {
    case adios2::Mode::Write:
    case adios2::Mode::Append:
        m_Writer = true;
        if (m_Ranks > 256)
            throw std::invalid_argument("nvs engine: " + std::to_string(m_Ranks) +
                                        " ranks: a pool has at most 256 lanes, one per rank");
        OpenWriter();
        break;
    case adios2::Mode::Read:
        OpenReader();
        break;
    default:
        throw std::invalid_argument("nvs engine: only the modes Write, Append and Read (streaming); "
                                    "ReadRandomAccess is not supported");
    }
}

NvsEngine::~NvsEngine()
{
    if (!m_Closed)
    {
        try
        {
            DoClose();
        }
        catch (...)
        {
        }
    }
}

std::string NvsEngine::Param(const std::string &key, const std::string &def) const
{
    adios2::Params p = m_IO.Parameters();
    for (const auto &kv : p)
    {
        if (kv.first.size() != key.size())
            continue;
        bool same = true;
        for (size_t i = 0; i < key.size(); ++i)
            if (std::tolower(kv.first[i]) != std::tolower(key[i]))
                same = false;
        if (same)
            return kv.second;
    }
    return def;
}

#if NVS_ADIOS2_MPI
/* The maximum of `*in` over every rank of MPI_COMM_WORLD into `*out`; an error, not a
 * hang, when some rank does not take part within OpenTimeout (an Open by some ranks
 * only: a communicator other than MPI_COMM_WORLD, which this engine cannot see). */
void NvsEngine::Allreduce(void *in, void *out, MPI_Datatype type)
{
    MPI_Request req;
    MPI_Iallreduce(in, out, 1, type, MPI_MAX, MPI_COMM_WORLD, &req);
    const bool forever = m_OpenTimeout < 0;
    const auto deadline = Deadline(forever ? 0 : m_OpenTimeout);
    for (int done = 0;;)
    {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (!forever && std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error(
                "nvs engine: " + m_PoolPath + ": rank " + std::to_string(m_Rank) + " of " +
                std::to_string(m_Ranks) + " waited " + std::to_string((int64_t)m_OpenTimeout) +
                " s (OpenTimeout) for every rank of MPI_COMM_WORLD to open it for writing: this "
                "engine writes an output from every rank of MPI_COMM_WORLD (ADIOS2 does not show "
                "a plugin engine the communicator of an Open by some ranks only)");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}
#endif

/* Every rank learns whether every rank got here without an error: the error of the
 * highest-numbered failing rank is everyone's. Returns on success, throws otherwise. */
void NvsEngine::Collective(const std::string &error)
{
#if NVS_ADIOS2_MPI
    if (m_Ranks > 1)
    {
        int failed = error.empty() ? -1 : (int)m_Rank, first = -1;
        Allreduce(&failed, &first, MPI_INT);
        if (first < 0)
            return;
        // the failing rank with the highest number tells its error to every rank
        uint64_t len = error.size();
        MPI_Bcast(&len, 1, MPI_UINT64_T, first, MPI_COMM_WORLD);
        std::string what = error;
        what.resize(len);
        MPI_Bcast(&what[0], (int)len, MPI_CHAR, first, MPI_COMM_WORLD);
        if (!error.empty())
            throw std::runtime_error(error);
        throw std::runtime_error(what + " (rank " + std::to_string(first) + ")");
    }
#endif
    if (!error.empty())
        throw std::runtime_error(error);
}

/* How rank 0 makes a pool: PoolSize, SegmentSize, SparsePool. */
struct NewPool
{
    uint64_t size;
    uint64_t segment; // 0: nvs's default
    bool sparse;
};

/* Rank 0's part of a writer's Open: make (or replace) the pool, as the mode says. */
static void PreparePool(const std::string &path, adios2::Mode mode, const NewPool &how, uint32_t ranks)
{
    nvs_create_options opts;
    std::memset(&opts, 0, sizeof opts);
    opts.lanes_max = ranks;
    opts.lane_names = 1;
    opts.segment_len = how.segment;
    const uint64_t size = how.size;
    const auto create = how.sparse ? nvs_pool_create_sparse : nvs_pool_create;
    nvs_pool *pool = nullptr;
    struct stat st;
    int32_t rc;
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (mode == adios2::Mode::Write && exists && S_ISREG(st.st_mode))
    {
        // Write starts a new stream, as BP5 replaces its output: the new pool is made
        // beside the old one and renamed over it, so a Write that fails (no room, a bad
        // size) leaves the old pool as it was. Followers of the old file see it replaced.
        // Never under a live writer of it (another job writing the same output, another
        // engine of this process, another run): its steps would go on into a file no
        // name reaches any more, silently lost. Its writers' locks (nvs's: OFD write
        // locks on the pool's first bytes) are taken here until the new pool is in
        // place, so two Writes cannot replace each other's either.
        const int held = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        struct flock fl;
        std::memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = 0;
        fl.l_len = 64 + 256; // the writer's byte and every lane's (nvs-std's locks)
        if (held < 0 || ::fcntl(held, F_OFD_SETLK, &fl) != 0)
        {
            const int e = errno;
            if (held >= 0)
                ::close(held);
            if (e == EAGAIN || e == EACCES)
                throw std::runtime_error(
                    "nvs engine: Write: " + path +
                    " is being written by a live writer (another job writing the same output, "
                    "another engine or another run): refused, nothing changed");
            throw std::runtime_error("nvs engine: Write: cannot open " + path + " to replace it: " +
                                     std::strerror(e));
        }
        const std::string fresh = path + ".nvs-new-" + std::to_string(::getpid());
        rc = create(fresh.c_str(), size, &opts, &pool);
        if (rc != NVS_OK)
        {
            ::close(held);
            Fail("create " + path, rc);
        }
        rc = nvs_pool_close(pool);
        if (rc != NVS_OK || ::rename(fresh.c_str(), path.c_str()) != 0)
        {
            const std::string why = rc != NVS_OK ? nvs_last_error() : std::strerror(errno);
            ::unlink(fresh.c_str());
            ::close(held);
            throw std::runtime_error("nvs engine: Write: cannot replace " + path + ": " + why);
        }
        ::close(held);
        return;
    }
    if (mode == adios2::Mode::Write && exists && !S_ISCHR(st.st_mode))
        throw std::invalid_argument("nvs engine: Write: " + path +
                                    " is neither a regular file nor a device");
    if (exists && mode != adios2::Mode::Write)
        return; // Append: every rank opens its lane of the pool there
    // a new file, or a device (device-DAX) formatted in place: the new stream fills it
    rc = create(path.c_str(), size, &opts, &pool);
    if (rc != NVS_OK && !exists && ::stat(path.c_str(), &st) == 0)
        Fail("create " + path + " (another writer created it meanwhile: another job writing "
             "the same output?)",
             rc);
    if (rc != NVS_OK)
        Fail("create " + path, rc);
    rc = nvs_pool_close(pool);
    if (rc != NVS_OK)
        Fail("create " + path, rc);
}

void NvsEngine::OpenWriter()
{
    // Every parameter is checked before anything on disk changes.
    std::string error;
    NewPool how{};
    try
    {
        const uint64_t size = ParseSize(Param("PoolSize", "256M"));
        how.size = size;
        how.sparse = ParseBool("SparsePool", Param("SparsePool", "true"));
        // Segments of 4 MiB (or nvs's default, 1/16 of the pool, if smaller): a lane
        // claims a segment at a time, and a sparse pool takes memory a segment at a time.
        const std::string seg = Param("SegmentSize", "");
        if (!seg.empty())
            how.segment = ParseSize(seg);
        else if (size / 16 > (4u << 20))
            how.segment = 4u << 20;
        const bool replace = ParseBool("Replace", Param("Replace", "false"));
        if (m_OpenMode == adios2::Mode::Write && m_Rank == 0 && !replace)
        {
            char *real = ::realpath(m_PoolPath.c_str(), nullptr);
            const std::string key = real ? real : m_PoolPath;
            std::free(real);
            if (WrittenPaths().count(key))
                throw std::invalid_argument(
                    "nvs engine: Write: this process already wrote " + m_PoolPath +
                    " in Write mode: a plugin engine is not told the name given to Open, so "
                    "a second output needs a PoolPath of its own (a second Write would replace "
                    "the first output); refused, nothing changed (the parameter Replace=true "
                    "replaces it on purpose, as a rewritten restart file)");
        }
    }
    catch (const std::exception &e)
    {
        error = e.what();
    }
    // every rank is here, its parameters good (or it is an error, after OpenTimeout at
    // most) before anything changes
    Collective(error);
    try
    {
        if (m_Rank == 0)
            PreparePool(m_PoolPath, m_OpenMode, how, m_Ranks);
    }
    catch (const std::exception &e)
    {
        error = e.what();
    }
    Collective(error);

    int32_t rc = nvs_pool_open_lane(m_PoolPath.c_str(), m_Rank, &m_Pool);
    uint64_t latest = 0;
    if (rc == NVS_E_ARG)
        error = "nvs engine: " + m_PoolPath + ": rank " + std::to_string(m_Rank) +
                " cannot write a lane of its own: " + nvs_last_error() +
                " (a pool this engine writes has lane names and a lane per rank: one written "
                "by an older nvs-adios2 or by another program is read with `nvs`; start a new "
                "one with Write)";
    else if (rc == NVS_E_BUSY)
        error = "nvs engine: " + m_PoolPath + ": rank " + std::to_string(m_Rank) +
                "'s lane is being written by a live writer (another job writing the same "
                "output?): refused";
    else if (rc != NVS_OK)
        error = std::string("nvs engine: open ") + m_PoolPath + ": " + nvs_status_name(rc) + ": " +
                nvs_last_error();
    else
    {
        rc = nvs_latest_on(m_Pool, m_Rank, kStepIndex, &latest);
        if (rc != NVS_OK && rc != NVS_E_NOT_FOUND)
            error = std::string("nvs engine: open ") + m_PoolPath + ": " + nvs_status_name(rc) +
                    ": " + nvs_last_error();
    }
    try
    {
        Collective(error);
    }
    catch (...)
    {
        if (m_Pool)
            nvs_pool_close_detached(m_Pool);
        m_Pool = nullptr;
        throw;
    }
    // Append continues after the last step any rank committed (a rank that died in a
    // step it never committed skips it: readers skip that step).
#if NVS_ADIOS2_MPI
    if (m_Ranks > 1)
    {
        uint64_t mine = latest;
        Allreduce(&mine, &latest, MPI_UINT64_T);
    }
#endif
    m_Step = latest;
    if (m_OpenMode == adios2::Mode::Write && m_Rank == 0)
    {
        char *real = ::realpath(m_PoolPath.c_str(), nullptr);
        WrittenPaths().insert(real ? real : m_PoolPath);
        std::free(real);
    }
}

/* Whether a pool that cannot be followed yet may still become one: it does not exist
 * yet, or a writer is creating it (its first line is still zeros, or nvs's writer lock,
 * an OFD write lock on byte 0, is held while it formats). Anything else (not a file,
 * random bytes, a damaged pool) will not change by waiting. */
static bool MayBecomeAPool(const std::string &path)
{
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
        return errno == ENOENT;
    if (!S_ISREG(st.st_mode))
        return false;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    unsigned char head[64] = {0};
    const ssize_t n = ::pread(fd, head, sizeof head, 0);
    bool zeros = n >= 0;
    for (ssize_t i = 0; i < n; ++i)
        zeros = zeros && head[i] == 0;
    struct flock fl;
    std::memset(&fl, 0, sizeof fl);
    fl.l_type = F_RDLCK; // a conflicting (write) lock is reported; none is taken
    fl.l_whence = SEEK_SET;
    fl.l_start = 0;
    fl.l_len = 1;
    const bool writer = ::fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    ::close(fd);
    return zeros || writer;
}

void NvsEngine::OpenReader()
{
    const bool forever = m_OpenTimeout < 0;
    const auto deadline = Deadline(forever ? 0 : m_OpenTimeout);
    for (;;)
    {
        struct stat before, after;
        const bool had = ::stat(m_PoolPath.c_str(), &before) == 0;
        int32_t rc = nvs_follower_open(m_PoolPath.c_str(), nullptr, &m_Follower);
        if (rc == NVS_OK)
        {
            // The file followed is the one at PoolPath now (not one a Write replaced
            // meanwhile): its identity tells a later Write's replacement apart.
            if (had && ::stat(m_PoolPath.c_str(), &after) == 0 && before.st_dev == after.st_dev &&
                before.st_ino == after.st_ino)
            {
                m_Dev = before.st_dev;
                m_Ino = before.st_ino;
                break;
            }
            nvs_follower_close(m_Follower);
            m_Follower = nullptr;
            continue;
        }
        // the writer may not have created (or finished formatting) the pool yet
        if (!MayBecomeAPool(m_PoolPath) || (!forever && std::chrono::steady_clock::now() >= deadline))
            Fail("follow " + m_PoolPath, rc);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    int32_t rc = nvs_follower_expect_lane(m_Follower, 0);
    if (rc != NVS_OK)
        Fail("follow " + m_PoolPath, rc);
}

/* A rank's step index (lane `lane`, version `version`, `len` bytes) into m_Pending. */
void NvsEngine::TakeIndex(uint32_t lane, uint64_t version, size_t len)
{
    const uint64_t step = version - 1;
    const std::string where = "the index of step " + std::to_string(step) + " of rank " +
                              std::to_string(lane) + " in " + m_PoolPath;
    std::vector<char> text(len);
    size_t got = 0;
    int32_t rc = nvs_follower_get_on(m_Follower, lane, kStepIndex, version, text.data(), text.size(), &got);
    if (rc != NVS_OK)
        Fail("read " + where, rc);
    std::stringstream lines(std::string(text.data(), got));
    std::string line;
    RankStep rs;
    StepVar *cur = nullptr;
    auto damaged = [&](const std::string &why) {
        return std::runtime_error("nvs engine: " + where + " is damaged or not this engine's (" +
                                  why + (line.empty() ? "" : ": the line \"" + line + "\"") + ")");
    };
    bool head = false;
    while (std::getline(lines, line))
    {
        const std::vector<std::string> f = Fields(line);
        uint64_t a = 0, b = 0;
        if (!head)
        {
            if (f.size() != 4 || f[0] != "nvs-adios2" || f[1] != "2" || !ParseU64(f[2], a) ||
                !ParseU64(f[3], b) || a == 0 || a > 256 || b != lane)
                throw damaged("not a version-2 index of this rank: a pool written by an older "
                              "nvs-adios2 is read with `nvs`");
            rs.ranks = (uint32_t)a;
            head = true;
        }
        else if (f.size() == 5 && f[0] == "v")
        {
            StepVar v;
            v.dtype = f[2];
            if (f[3].size() != 1 || std::string("glvr").find(f[3][0]) == std::string::npos ||
                !ParseDims(f[4], v.shape) || rs.vars.count(f[1]))
                throw damaged("a variable's line");
            v.kind = f[3][0];
            rs.order.push_back(f[1]);
            cur = &(rs.vars[f[1]] = std::move(v));
        }
        else if (f.size() >= 4 && f[0] == "a" && (f[3] == "0" || f[3] == "1") && lane == 0)
        {
            Attr at;
            at.dtype = f[2];
            at.value = f[3] == "1";
            for (size_t i = 4; i < f.size(); ++i)
            {
                std::string e;
                if (!Unhex(f[i], e))
                    throw damaged("an attribute's line");
                at.elems.push_back(std::move(e));
            }
            if (at.value && at.elems.size() != 1)
                throw damaged("an attribute's line");
            rs.attrs[f[1]] = std::move(at);
        }
        else if (f.size() == 7 && f[0] == "b" && cur)
        {
            Block bl;
            bl.rank = lane;
            if (!ParseDims(f[1], bl.start) || !ParseDims(f[2], bl.count) || !ParseU64(f[3], a) ||
                !ParseU64(f[4], b) || !Unhex(f[5], bl.min) || !Unhex(f[6], bl.max))
                throw damaged("a block's line");
            bl.offset = a;
            bl.bytes = b;
            cur->blocks.push_back(std::move(bl));
        }
        else
            throw damaged("an unknown line");
    }
    if (!head)
        throw damaged("empty");
    const uint32_t ranks = rs.ranks;
    m_Pending[step][lane] = std::move(rs);
    uint64_t &last = m_LaneLast[lane];
    last = std::max(last, step + 1);
    // every rank of the job is a lane the stream has: it ends only when all have ended
    for (; m_Expected < ranks; ++m_Expected)
    {
        rc = nvs_follower_expect_lane(m_Follower, m_Expected);
        if (rc != NVS_OK)
            Fail("follow " + m_PoolPath + " (rank " + std::to_string(m_Expected) + ")", rc);
    }
}

/* Makes the first step every rank has committed the current one, if there is one;
 * steps some rank never committed but went on past are dropped. */
bool NvsEngine::ServeReady()
{
    while (!m_Pending.empty())
    {
        auto first = m_Pending.begin();
        const uint64_t step = first->first;
        const uint32_t ranks = first->second.begin()->second.ranks;
        const std::vector<uint32_t> missing = Missing(first->second);
        bool abandoned = true;
        for (uint32_t r : missing)
            abandoned = abandoned && m_LaneLast[r] > step + 1;
        for (const auto &kv : first->second)
            if (kv.second.ranks != ranks || kv.first >= ranks)
                throw std::runtime_error("nvs engine: step " + std::to_string(step) + " in " +
                                         m_PoolPath + ": its ranks disagree on how many ranks there are");
        if (missing.empty())
        {
            m_StepAttrs = std::move(first->second.begin()->second.attrs); // rank 0's
            // one StepVar per variable, with every rank's blocks in rank order
            m_Order.clear();
            m_Vars.clear();
            m_Loaded.clear();
            for (auto &kv : first->second)
                for (const std::string &name : kv.second.order)
                {
                    StepVar &from = kv.second.vars[name];
                    auto it = m_Vars.find(name);
                    if (it == m_Vars.end())
                    {
                        m_Order.push_back(name);
                        it = m_Vars.emplace(name, std::move(from)).first;
                        continue;
                    }
                    StepVar &into = it->second;
                    if (into.dtype != from.dtype || into.kind != from.kind || into.shape != from.shape)
                        throw std::runtime_error("nvs engine: variable " + name + " of step " +
                                                 std::to_string(step) + ": rank " +
                                                 std::to_string(kv.first) +
                                                 " wrote it with another type or shape than a lower rank");
                    for (Block &b : from.blocks)
                        into.blocks.push_back(std::move(b));
                }
            // local values are read as a 1-D array: one element per block, in rank order
            for (auto &kv : m_Vars)
                if (kv.second.kind == 'r')
                {
                    kv.second.shape = {kv.second.blocks.size()};
                    for (size_t i = 0; i < kv.second.blocks.size(); ++i)
                    {
                        kv.second.blocks[i].start = {i};
                        kv.second.blocks[i].count = {1};
                    }
                }
            m_Step = step;
            m_AnyStep = true;
            m_Pending.erase(first);
            return true;
        }
        if (!abandoned)
            return false;
        m_Pending.erase(first); // a rank died in it and the job went on without it
    }
    return false;
}

adios2::StepStatus NvsEngine::BeginStep(adios2::StepMode, const float timeoutSeconds)
{
    if (m_Closed)
        throw std::logic_error("nvs engine: BeginStep after Close");
    if (m_InStep)
        throw std::logic_error("nvs engine: BeginStep inside a step");
    if (m_Writer)
    {
        m_Order.clear();
        m_Vars.clear();
        m_InStep = true;
        return adios2::StepStatus::OK;
    }

    double timeout = timeoutSeconds >= 0 ? timeoutSeconds : m_Timeout;
    if (timeout > 3.2e9 || std::isnan(timeout))
        timeout = -1; // too long for the clock: as long as it takes
    const auto deadline = Deadline(timeout >= 0 ? timeout : 0);
    // Waits are cut in slices: between them the reader checks that PoolPath is still the
    // file it follows (a Write replaces it with a new stream, and the old one's writer may
    // have detached: no event would ever come).
    const int64_t slice = 500;
    const std::string after = m_AnyStep ? " after step " + std::to_string(m_Step) : " before any step";
    for (;;)
    {
        if (ServeReady())
        {
            DefineReadAttributes(m_StepAttrs);
            DefineReadVariables();
            m_InStep = true;
            return adios2::StepStatus::OK;
        }
        int64_t ms = slice;
        bool last = false;
        if (timeout >= 0)
        {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
            ms = left > slice ? slice : (left > 0 ? left : 0);
            last = left <= slice;
        }
        nvs_event ev;
        int32_t rc = nvs_follower_wait(m_Follower, ms, &ev);
        // nvs ends a wait with NVS_E_IO too once the file is replaced and no writer holds it.
        if ((rc == NVS_OK && ev.kind == NVS_EVENT_TIMEOUT && !last) || rc == NVS_E_IO)
        {
            struct stat st;
            if (::stat(m_PoolPath.c_str(), &st) != 0 || st.st_dev != m_Dev || st.st_ino != m_Ino)
                throw std::runtime_error("nvs engine: " + m_PoolPath +
                                         " was replaced or removed (a writer in Write mode starts a "
                                         "new stream)" + after + "; open it again to read the new stream");
        }
        if (rc != NVS_OK)
            Fail("follow " + m_PoolPath, rc);
        switch (ev.kind)
        {
        case NVS_EVENT_OBJECT:
            // a variable's object: its rank's step index follows in the same commit
            if (std::strcmp(ev.name, kStepIndex) == 0)
                TakeIndex(ev.lane, ev.version, ev.len);
            continue;
        case NVS_EVENT_END_OF_STREAM:
        {
            if (m_Pending.empty())
                return adios2::StepStatus::EndOfStream;
            const auto &first = *m_Pending.begin();
            throw std::runtime_error("nvs engine: the stream of " + m_PoolPath + " ended" + after +
                                     " without rank(s) " + RankList(Missing(first.second)) + " of step " +
                                     std::to_string(first.first) +
                                     " (their writers ended their streams without it)");
        }
        case NVS_EVENT_WRITER_GONE:
        {
            // The ranks the next step lacks are the ones that died in it (others may have
            // died after committing it: killed with them by the MPI launcher).
            std::string who = "rank " + std::to_string(ev.lane);
            if (!m_Pending.empty())
            {
                const auto &first = *m_Pending.begin();
                const std::vector<uint32_t> missing = Missing(first.second);
                who = (missing.size() > 1 ? "rank(s) " : "rank ") + RankList(missing) +
                      " (step " + std::to_string(first.first) + " lacks its blocks)";
            }
            throw std::runtime_error("nvs engine: the writer of " + who + " of " + m_PoolPath +
                                     " died (no writer holds its lane and its stream was not ended)" +
                                     after);
        }
        case NVS_EVENT_TIMEOUT:
            if (!last)
                continue;
            return adios2::StepStatus::NotReady;
        default:
            throw std::runtime_error("nvs engine: unknown follower event " + std::to_string(ev.kind));
        }
    }
}

void NvsEngine::DefineReadVariables()
{
    for (const std::string &name : m_Order)
    {
        StepVar &sv = m_Vars[name];
        bool known = false;
#define X(T, S)                                                                                    \
    if (sv.dtype == S)                                                                             \
    {                                                                                              \
        known = true;                                                                              \
        sv.elemSize = sizeof(T);                                                                   \
        adios2::Variable<T> v = m_IO.InquireVariable<T>(name);                                     \
        if (!v && m_IO.InquireVariableType(name) != adios2::DataType::None)                        \
            throw std::runtime_error("nvs engine: variable " + name + " is " + sv.dtype +          \
                                     " in step " + std::to_string(m_Step) + ", another type " +    \
                                     "before (" + m_IO.VariableType(name) + "): an IO cannot " +   \
                                     "redefine a variable's type; read it with another IO");      \
        if (!v)                                                                                    \
        {                                                                                          \
            if (sv.kind == 'v')                                                                    \
                v = m_IO.DefineVariable<T>(name);                                                  \
            else if (sv.kind == 'l')                                                               \
                v = m_IO.DefineVariable<T>(name, {}, {}, sv.blocks.empty() ? adios2::Dims{1}      \
                                                                          : sv.blocks[0].count);  \
            else                                                                                   \
                v = m_IO.DefineVariable<T>(name, sv.shape, adios2::Dims(sv.shape.size(), 0),       \
                                           sv.shape);                                              \
        }                                                                                          \
        else if (sv.kind == 'g' || sv.kind == 'r')                                                 \
        {                                                                                          \
            if (v.Shape() != sv.shape)                                                             \
                v.SetShape(sv.shape);                                                              \
        }                                                                                          \
        /* Each step starts with the whole array selected, as with BP5, and with a block id  \
         * no one sets: a SetBlockSelection is seen at the Get. */                                 \
        v.SetBlockSelection(kNoBlock);                                                             \
        if (sv.kind == 'g' || sv.kind == 'r')                                                      \
            v.SetSelection({adios2::Dims(sv.shape.size(), 0), sv.shape});                          \
    }
        NVS_DTYPES(X)
#undef X
        if (!known)
            throw std::runtime_error("nvs engine: variable " + name + " has dtype " + sv.dtype +
                                     ", not one this engine reads");
    }
}

/* The IO's attributes as lines of a step index: "a NAME DTYPE VALUE HEX..." (one hex
 * field per element; VALUE 1 for a single value). Checked before anything is committed. */
std::string NvsEngine::AttributeLines()
{
    std::string lines;
    for (const auto &kv : m_IO.AvailableAttributes())
    {
        const std::string &name = kv.first;
        if (name.empty() || name.find_first_of(std::string("\t\n\0", 3)) != std::string::npos)
            throw std::invalid_argument("nvs engine: attribute \"" + name +
                                        "\": a tab, newline or NUL cannot be part of its name "
                                        "here; nothing of step " + std::to_string(m_Step) +
                                        " was committed");
        std::string line;
        if (auto a = m_IO.InquireAttribute<std::string>(name))
        {
            line = "a\t" + name + "\tstring\t" + (a.IsValue() ? "1" : "0");
            for (const std::string &e : a.Data())
                line += "\t" + Hex(e.data(), e.size());
        }
#define X(T, S)                                                                                    \
    else if (auto a = m_IO.InquireAttribute<T>(name))                                              \
    {                                                                                              \
        line = "a\t" + name + "\t" + S + "\t" + (a.IsValue() ? "1" : "0");                        \
        for (const T &e : a.Data())                                                                \
            line += "\t" + Hex(&e, sizeof(T));                                                     \
    }
        NVS_DTYPES(X)
#undef X
        else
            throw std::invalid_argument("nvs engine: attribute " + name + " is of type " +
                                        m_IO.AttributeType(name) + ", not one this engine stores; "
                                        "nothing of step " + std::to_string(m_Step) + " was committed");
        lines += line + "\n";
    }
    return lines;
}

/* Defines (or updates) the step's attributes in the reader's IO. */
void NvsEngine::DefineReadAttributes(const std::map<std::string, Attr> &attrs)
{
    for (const auto &kv : attrs)
    {
        const std::string &name = kv.first;
        const Attr &at = kv.second;
        auto same = m_Attrs.find(name);
        if (same != m_Attrs.end() && same->second.dtype == at.dtype &&
            same->second.value == at.value && same->second.elems == at.elems)
            continue;
        if (same != m_Attrs.end() && same->second.dtype != at.dtype)
            m_IO.RemoveAttribute(name);
        bool known = false;
        if (at.dtype == "string")
        {
            known = true;
            if (at.value && at.elems.size() == 1)
                m_IO.DefineAttribute<std::string>(name, at.elems[0], "", "/", true);
            else
                m_IO.DefineAttribute<std::string>(name, at.elems.data(), at.elems.size(), "", "/", true);
        }
#define X(T, S)                                                                                    \
    else if (at.dtype == S)                                                                        \
    {                                                                                              \
        known = true;                                                                              \
        std::vector<T> data(at.elems.size());                                                      \
        for (size_t i = 0; i < data.size(); ++i)                                                   \
        {                                                                                          \
            if (at.elems[i].size() != sizeof(T))                                                   \
                throw std::runtime_error("nvs engine: attribute " + name + " of step " +           \
                                         std::to_string(m_Step) + " is damaged");                  \
            std::memcpy(&data[i], at.elems[i].data(), sizeof(T));                                  \
        }                                                                                          \
        if (at.value && data.size() == 1)                                                          \
            m_IO.DefineAttribute<T>(name, data[0], "", "/", true);                                 \
        else                                                                                       \
            m_IO.DefineAttribute<T>(name, data.data(), data.size(), "", "/", true);                \
    }
        NVS_DTYPES(X)
#undef X
        if (!known)
            throw std::runtime_error("nvs engine: attribute " + name + " of step " +
                                     std::to_string(m_Step) + " has dtype " + at.dtype +
                                     ", not one this engine reads");
        m_Attrs[name] = at;
    }
}

void NvsEngine::EndStep()
{
    if (!m_InStep)
        throw std::logic_error("nvs engine: EndStep outside a step");
    m_InStep = false;
    if (!m_Writer)
    {
        m_Vars.clear();
        m_Order.clear();
        m_Loaded.clear();
        return;
    }
    // one batch on this rank's lane: every variable it put in the step, then its step
    // index; one commit
    const uint64_t version = m_Step + 1;
    std::string index = "nvs-adios2\t2\t" + std::to_string(m_Ranks) + "\t" + std::to_string(m_Rank) + "\n";
    if (m_Rank == 0)
        index += AttributeLines(); // the IO's attributes as they are at this step
    std::vector<nvs_object> objs(m_Order.size() + 1);
    std::vector<std::vector<nvs_iovec>> parts(m_Order.size()); // each variable's blocks
    for (size_t i = 0; i < m_Order.size(); ++i)
    {
        const StepVar &v = m_Vars[m_Order[i]];
        index += "v\t" + m_Order[i] + "\t" + v.dtype + "\t" + v.kind + "\t" + DimsText(v.shape) + "\n";
        for (const Block &b : v.blocks)
            index += "b\t" + DimsText(b.start) + "\t" + DimsText(b.count) + "\t" +
                     std::to_string(b.offset) + "\t" + std::to_string(b.bytes) + "\t" +
                     Hex(b.min.data(), b.min.size()) + "\t" + Hex(b.max.data(), b.max.size()) + "\n";
        std::vector<nvs_iovec> &p = parts[i];
        for (const Block &b : v.blocks)
            p.push_back({b.ext ? b.ext : v.data.data() + b.at, b.bytes});
        nvs_object &o = objs[i];
        std::memset(&o, 0, sizeof o);
        o.name = m_Order[i].c_str();
        o.parts = p.data();
        o.parts_len = p.size();
        o.version = version;
    }
    nvs_object &o = objs.back();
    std::memset(&o, 0, sizeof o);
    o.name = kStepIndex;
    o.data = index.data();
    o.len = index.size();
    o.version = version;
    const std::string what = "commit step " + std::to_string(m_Step) + " of rank " + std::to_string(m_Rank);
    int32_t rc = nvs_put_batch(m_Pool, m_Rank, objs.data(), objs.size(), nullptr);
    if (rc == NVS_E_FULL && m_KeepSteps > 0)
    {
        // Retention: the pool is full (a failed batch commits nothing); release this
        // rank's segments holding only steps older than the last KeepSteps, and retry.
        uint32_t freed = 0;
        const int32_t r = nvs_reclaim(m_Pool, m_KeepSteps, &freed);
        if (r != NVS_OK)
            Fail(what + " (the pool was full; releasing the steps before the last " +
                     std::to_string(m_KeepSteps) + " failed)",
                 r);
        if (freed > 0)
            rc = nvs_put_batch(m_Pool, m_Rank, objs.data(), objs.size(), nullptr);
    }
    if (rc == NVS_E_FULL)
        Fail(what + (m_KeepSteps > 0 ? " (the pool is full even without the steps before the last " +
                                           std::to_string(m_KeepSteps) + ": a larger PoolSize)"
                                     : " (the pool is full: a larger PoolSize, or KeepSteps)"),
             rc);
    if (rc != NVS_OK)
        Fail(what, rc);
    m_Vars.clear();
    m_Order.clear();
    ++m_Step;
}

size_t NvsEngine::CurrentStep() const { return m_Step; }

/* ADIOS2 opens a plugin engine in Read mode when ReadRandomAccess is asked for (Python's
 * FileReader, bpls): a stream does not know its number of steps, so the caller that asks
 * gets an error rather than 0. */
size_t NvsEngine::Steps() const
{
    throw std::invalid_argument(
        "nvs engine: Steps(): " + m_PoolPath + " is read as a stream (BeginStep/EndStep): "
        "ReadRandomAccess (Python's FileReader, bpls) is not supported by this engine (ADIOS2 "
        "opens a plugin engine in Read mode instead); read it with adios2.Stream(..., \"r\")");
}

void NvsEngine::DoClose(const int)
{
    if (m_Closed)
        return;
    if (m_Writer)
    {
        if (m_InStep)
            EndStep();
        int32_t rc = m_EndStream ? nvs_pool_close(m_Pool) : nvs_pool_close_detached(m_Pool);
        m_Closed = true;
        m_Pool = nullptr;
        if (rc != NVS_OK)
            Fail("close " + m_PoolPath, rc);
    }
    else
    {
        nvs_follower_close(m_Follower);
        m_Follower = nullptr;
        m_Closed = true;
    }
}

adios2::MinVarInfo *NvsEngine::MinBlocksInfo(const std::string &varName, const size_t step) const
{
    // A stream knows the current step's blocks only: ADIOS2 asks for them by step 0
    // (Python) or by the absolute step (C++), as of BP5 in streaming mode.
    if (m_Writer || !m_InStep)
        return nullptr;
    auto it = m_Vars.find(varName);
    if (it == m_Vars.end())
        return nullptr;
    const StepVar &v = it->second;
    const bool array = v.kind == 'g' || v.kind == 'r';
    auto *info = new adios2::MinVarInfo(v.kind == 'v' ? 0 : (int)(array ? v.shape.size()
                                                                       : (v.blocks.empty() ? 0 : v.blocks[0].count.size())),
                                        array ? v.shape.data() : nullptr);
    info->Step = m_Step;
    info->WasLocalValue = false;
    info->IsValue = v.kind == 'v';
    for (size_t i = 0; i < v.blocks.size(); ++i)
    {
        const Block &b = v.blocks[i];
        adios2::MinBlockInfo mb;
        mb.WriterID = (int)b.rank;
        mb.BlockID = i;
        mb.Start = b.start.data();
        mb.Count = b.count.data();
        std::memset(&mb.MinMax, 0, sizeof mb.MinMax);
        std::memcpy(&mb.MinMax.MinUnion, b.min.data(), std::min(b.min.size(), sizeof mb.MinMax.MinUnion));
        std::memcpy(&mb.MinMax.MaxUnion, b.max.data(), std::min(b.max.size(), sizeof mb.MinMax.MaxUnion));
        // a value's bytes are its extremes
        mb.BufferP = info->IsValue ? (void *)&v.blocks[i].min[0] : nullptr;
        info->BlocksInfo.push_back(mb);
    }
    return info;
}

/* A copy of a block's bytes in its variable's data (a sync Put's caller may reuse its
 * buffer at once). */
static void Keep(StepVar &v, Block &b, const char *bytes, const std::string &what)
{
    try
    {
        b.at = v.data.size();
        v.data.insert(v.data.end(), bytes, bytes + b.bytes);
    }
    catch (const std::bad_alloc &)
    {
        throw std::runtime_error("nvs engine: " + what + ": cannot allocate " +
                                 std::to_string(b.bytes) + " more bytes for it");
    }
    b.ext = nullptr;
}

/* After PerformPuts the caller may reuse the buffers of its deferred Puts: copy them. */
void NvsEngine::PerformPuts()
{
    for (auto &kv : m_Vars)
        for (Block &b : kv.second.blocks)
            if (b.ext)
                Keep(kv.second, b, b.ext, "variable " + kv.first);
}

template <class T>
void NvsEngine::Put(adios2::Variable<T> &variable, const T *values, bool deferred)
{
    if (!m_Writer)
        throw std::logic_error("nvs engine: Put on a reader");
    if (!m_InStep)
        throw std::logic_error("nvs engine: Put outside BeginStep/EndStep");
    const std::string name = variable.Name();
    CheckName(name);
    if (!variable.Operations().empty())
        throw std::invalid_argument("nvs engine: variable " + name + " has " +
                                    std::to_string(variable.Operations().size()) +
                                    " operator(s) (compression): not supported (nvs stores the "
                                    "values as they are); remove them for this engine");
    char kind;
    adios2::Dims shape, start, count;
    switch (variable.ShapeID())
    {
    case adios2::ShapeID::GlobalValue:
        kind = 'v';
        break;
    case adios2::ShapeID::LocalValue:
        kind = 'r';
        break;
    case adios2::ShapeID::GlobalArray:
        kind = 'g';
        shape = variable.Shape();
        start = variable.Start();
        count = variable.Count();
        if (start.empty())
            start.assign(shape.size(), 0);
        if (count.empty())
            count = shape;
        CheckBox(name, start, count, shape);
        break;
    case adios2::ShapeID::LocalArray:
        kind = 'l';
        count = variable.Count();
        break;
    default:
        throw std::invalid_argument("nvs engine: variable " + name +
                                    ": a joined array is not supported by this engine");
    }
    auto it = m_Vars.find(name);
    if (it == m_Vars.end())
    {
        StepVar v;
        v.dtype = DType<T>::str();
        v.kind = kind;
        v.shape = shape;
        v.elemSize = sizeof(T);
        it = m_Vars.emplace(name, std::move(v)).first;
        m_Order.push_back(name);
    }
    StepVar &v = it->second;
    if (v.shape != shape)
        throw std::invalid_argument("nvs engine: variable " + name +
                                    " put twice in a step with different shapes");
    if ((kind == 'v' || kind == 'r') && !v.blocks.empty())
        throw std::invalid_argument("nvs engine: variable " + name +
                                    ": a value is put once per step and rank (a second Put)");
    Block b;
    b.rank = m_Rank;
    b.start = start;
    b.count = count;
    b.offset = v.total;
    const size_t n = Bytes(count, sizeof(T), "variable " + name) / sizeof(T);
    b.bytes = n * sizeof(T);
    if (b.bytes > SIZE_MAX - v.total)
        throw std::invalid_argument("nvs engine: variable " + name + ": its blocks do not fit in memory");
    if (deferred)
        b.ext = reinterpret_cast<const char *>(values); // stored from there at EndStep: no copy
    else
        Keep(v, b, reinterpret_cast<const char *>(values), "variable " + name);
    Extremes(values, n, b);
    v.total += b.bytes;
    v.blocks.push_back(std::move(b));
}

/* A read of the current step that failed: a step the writers' retention (KeepSteps)
 * released while this reader was behind says so. */
void NvsEngine::ReadFailed(const std::string &what, uint32_t rank, int32_t rc)
{
    ReadFailed(what, rank, rc, nvs_last_error());
}

/* As above, with the message of the failed call (nvs_last_error() of the thread that made
 * it). */
void NvsEngine::ReadFailed(const std::string &what, uint32_t rank, int32_t rc, const std::string &error)
{
    Fail("read " + what + " of rank " + std::to_string(rank) +
             (rc == NVS_E_NOT_FOUND ? " (released by the writers' retention, KeepSteps, while "
                                      "this reader was behind?)"
                                    : ""),
         rc, error);
}

/* The bytes rank `rank` stored for `name` in the current step, read once per step. */
const Loaded &NvsEngine::Object(const std::string &name, uint32_t rank, const std::string &what)
{
    auto key = std::make_pair(rank, name);
    auto it = m_Loaded.find(key);
    if (it != m_Loaded.end())
        return it->second;
    size_t len = 0;
    int32_t rc = nvs_follower_get_on(m_Follower, rank, name.c_str(), m_Step + 1, nullptr, 0, &len);
    if (rc != NVS_OK)
        ReadFailed(what, rank, rc);
    Loaded data;
    data.p.reset(new (std::nothrow) char[len ? len : 1]);
    if (!data.p)
        throw std::runtime_error("nvs engine: " + what + ": cannot allocate " + std::to_string(len) +
                                 " bytes for it");
    data.n = len;
    rc = nvs_follower_get_on(m_Follower, rank, name.c_str(), m_Step + 1, data.p.get(), len, &len);
    if (rc != NVS_OK)
        ReadFailed(what, rank, rc);
    if (len != data.n)
        throw std::runtime_error("nvs engine: " + what + ": changed length while read");
    CheckBlocks(name, rank, len, what);
    return m_Loaded.emplace(key, std::move(data)).first->second;
}

/* Every block the index names lies inside the object (a damaged or forged pool is an
 * error, not a read past a buffer). */
void NvsEngine::CheckBlocks(const std::string &name, uint32_t rank, size_t len, const std::string &what)
{
    for (const Block &b : m_Vars[name].blocks)
        if (b.rank == rank && (b.offset > len || b.bytes > len - b.offset))
            throw std::runtime_error("nvs engine: " + what + " of rank " + std::to_string(rank) +
                                     ": " + std::to_string(len) + " bytes, its index names a block at " +
                                     std::to_string(b.offset) + "+" + std::to_string(b.bytes));
}

/* Whether a block can be read straight into the caller's buffer: the block is its rank's
 * whole object (not read yet), all of it is selected, and it is one run of the
 * destination (its rows span the destination's). One copy instead of two. `out` says
 * where; `ReadDirect` reads it. */
template <class T>
bool NvsEngine::Direct(const std::string &name, const Block &b, const adios2::Dims &lo,
                       const adios2::Dims &n, T *values, const adios2::Dims &dstOrigin,
                       const adios2::Dims &dstExt, const std::string &what, DirectRead &out)
{
    if (b.offset != 0 || n != b.count || m_Loaded.count(std::make_pair(b.rank, name)))
        return false;
    size_t own = 0; // the rank's blocks of this variable: the object is this one only
    for (const Block &x : m_Vars[name].blocks)
        own += x.rank == b.rank;
    if (own != 1)
        return false;
    size_t at = 0;
    for (size_t d = 0; d < n.size(); ++d)
    {
        if (d > 0 && n[d] != dstExt[d])
            return false;
        at = at * dstExt[d] + (lo[d] - dstOrigin[d]);
    }
    size_t len = 0;
    int32_t rc = nvs_follower_get_on(m_Follower, b.rank, name.c_str(), m_Step + 1, nullptr, 0, &len);
    if (rc != NVS_OK)
        ReadFailed(what, b.rank, rc);
    if (len != b.bytes)
    {
        CheckBlocks(name, b.rank, len, what);
        return false;
    }
    out = DirectRead{b.rank, reinterpret_cast<char *>(values + at), b.bytes};
    return true;
}

/* The CPUs this process may run on (its affinity: an MPI launcher or a batch system that
 * binds a rank to one core leaves it one), not the machine's: a helper thread on a CPU
 * already taken only slows the reads down. */
static size_t UsableCpus()
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return size_t(CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency()); // more CPUs than cpu_set_t holds
}

/* Read the blocks `Direct` placed, in the order given, then clear `reads`. Several
 * blocks of 8 MiB or more in all are read on up to one thread per CPU this process may
 * use (gets on one follower may run on several threads): one thread's verified copy does
 * not reach what the memory gives (BP5 reads two ranks' data in about the time it reads
 * one's). Blocks whose destinations overlap (a writer's overlapping boxes) are read in
 * order, on this thread, so that the last one wins as it does in BP5. */
void NvsEngine::ReadDirect(const std::string &name, std::vector<DirectRead> &reads, const std::string &what)
{
    if (reads.empty())
        return;
    size_t total = 0;
    for (const DirectRead &r : reads)
        total += r.bytes;
    size_t threads = 1;
    if (reads.size() > 1 && total >= (8u << 20)) // else one thread, with no look at the CPUs
    {
        std::vector<const DirectRead *> byDst;
        for (const DirectRead &r : reads)
            byDst.push_back(&r);
        std::sort(byDst.begin(), byDst.end(),
                  [](const DirectRead *a, const DirectRead *b) { return a->dst < b->dst; });
        bool disjoint = true;
        for (size_t i = 1; i < byDst.size(); ++i)
            disjoint = disjoint && byDst[i - 1]->dst + byDst[i - 1]->bytes <= byDst[i]->dst;
        if (disjoint)
            threads = std::min(reads.size(), UsableCpus());
    }
    std::vector<int32_t> rc(reads.size(), NVS_OK);
    std::vector<std::string> msg(reads.size());
    std::atomic<size_t> next{0};
    // Throws nothing (a helper thread's exception would end the process).
    auto work = [&]() noexcept {
        for (size_t i; (i = next.fetch_add(1)) < reads.size();)
        {
            size_t len = 0;
            int32_t r = nvs_follower_get_on(m_Follower, reads[i].rank, name.c_str(), m_Step + 1, reads[i].dst,
                                            reads[i].bytes, &len);
            const char *why = nullptr;
            if (r == NVS_OK && len != reads[i].bytes)
                r = NVS_E_CORRUPT, why = "its object changed size between two reads";
            rc[i] = r;
            try
            {
                if (r != NVS_OK)
                    msg[i] = why ? why : nvs_last_error();
            }
            catch (...)
            {
            }
        }
    };
    std::vector<std::thread> helpers;
    helpers.reserve(threads); // no allocation between the threads' starts
    for (size_t t = 1; t < threads; ++t)
    {
        try
        {
            helpers.emplace_back(work);
        }
        catch (...) // std::system_error, or std::bad_alloc for the thread's state
        {
            break; // no thread to be had: this one reads the rest
        }
    }
    work();
    for (std::thread &t : helpers)
        t.join();
    std::vector<DirectRead> done;
    done.swap(reads);
    for (size_t i = 0; i < done.size(); ++i)
        if (rc[i] != NVS_OK)
            ReadFailed(what, done[i].rank, rc[i], msg[i]);
}

template <class T>
StepVar &NvsEngine::ReadVar(adios2::Variable<T> &variable)
{
    if (m_Writer)
        throw std::logic_error("nvs engine: Get on a writer");
    if (!m_InStep)
        throw std::logic_error("nvs engine: Get outside BeginStep/EndStep");
    const std::string name = variable.Name();
    auto it = m_Vars.find(name);
    if (it == m_Vars.end())
        throw std::invalid_argument("nvs engine: variable " + name + " is not in step " +
                                    std::to_string(m_Step));
    StepVar &v = it->second;
    if (v.dtype != DType<T>::str())
        throw std::invalid_argument("nvs engine: variable " + name + " is " + v.dtype +
                                    ", read as " + DType<T>::str());
    for (const Block &b : v.blocks)
        if (b.bytes != Bytes(b.count, sizeof(T), "variable " + name))
            throw std::runtime_error("nvs engine: variable " + name + " of step " +
                                     std::to_string(m_Step) + ": a block of " +
                                     std::to_string(b.bytes) + " bytes, its count {" +
                                     DimsText(b.count) + "} needs another size");
    return v;
}

template <class T>
void NvsEngine::GetBox(adios2::Variable<T> &variable, T *values, adios2::Dims start,
                       adios2::Dims count, const adios2::Dims *memStart, const adios2::Dims *memCount)
{
    StepVar &v = ReadVar(variable);
    const std::string name = variable.Name();
    const std::string what = "variable " + name + " of step " + std::to_string(m_Step);
    if (v.kind == 'v')
    {
        if (v.blocks.empty())
            throw std::runtime_error("nvs engine: " + what + ": no rank wrote it");
        const Block &b = v.blocks[0]; // rank 0's, as BP5 reads a global value
        const Loaded &obj = Object(name, b.rank, what);
        std::memcpy(values, obj.data() + b.offset, sizeof(T));
        return;
    }
    if (v.kind == 'l')
        throw std::invalid_argument("nvs engine: " + what +
                                    " is a local array: read it a block at a time (a block "
                                    "Selection, or SetBlockSelection)");
    if (start.empty())
        start.assign(v.shape.size(), 0);
    if (count.empty())
        count = v.shape;
    CheckBox(name, start, count, v.shape);
    adios2::Dims dstOrigin = start, dstExt = count;
    if (memStart)
    {
        if (memStart->size() != count.size() || memCount->size() != count.size())
            throw std::invalid_argument("nvs engine: " + what + ": a memory selection of " +
                                        std::to_string(memCount->size()) + " dimensions for a box of " +
                                        std::to_string(count.size()));
        for (size_t d = 0; d < count.size(); ++d)
        {
            if ((*memStart)[d] > (*memCount)[d] || count[d] > (*memCount)[d] - (*memStart)[d])
                throw std::invalid_argument("nvs engine: " + what + ": the box {" + DimsText(count) +
                                            "} at {" + DimsText(*memStart) +
                                            "} does not fit the memory selection's {" +
                                            DimsText(*memCount) + "}");
            dstOrigin[d] = start[d] - (*memStart)[d]; // modular: offsets come out right
        }
        dstExt = *memCount;
    }
    std::vector<DirectRead> direct;
    for (const Block &b : v.blocks)
    {
        // the part of the block inside the box
        adios2::Dims lo(count.size()), n(count.size());
        bool empty = false;
        for (size_t d = 0; d < count.size(); ++d)
        {
            const size_t a = std::max(start[d], b.start[d]);
            const size_t e = std::min(start[d] + count[d], b.start[d] + b.count[d]);
            if (a >= e)
                empty = true;
            lo[d] = a;
            n[d] = empty ? 0 : e - a;
        }
        if (empty && !count.empty())
            continue;
        DirectRead r;
        if (Direct(name, b, lo, n, values, dstOrigin, dstExt, what, r))
        {
            direct.push_back(r);
            continue;
        }
        ReadDirect(name, direct, what); // the blocks before this one land first
        const Loaded &obj = Object(name, b.rank, what);
        CopyBox(sizeof(T), lo, n, obj.data() + b.offset, b.start, b.count,
                reinterpret_cast<char *>(values), dstOrigin, dstExt);
    }
    ReadDirect(name, direct, what);
}

template <class T>
void NvsEngine::GetBlock(adios2::Variable<T> &variable, T *values, size_t block)
{
    StepVar &v = ReadVar(variable);
    const std::string what = "variable " + variable.Name() + " of step " + std::to_string(m_Step);
    if (block >= v.blocks.size())
        throw std::invalid_argument("nvs engine: " + what + ": block " + std::to_string(block) +
                                    " of " + std::to_string(v.blocks.size()));
    const Block &b = v.blocks[block];
    const Loaded &obj = Object(variable.Name(), b.rank, what);
    std::memcpy(values, obj.data() + b.offset, b.bytes);
}

template <class T>
void NvsEngine::GetVar(adios2::Variable<T> &variable, T *values)
{
    StepVar &v = ReadVar(variable);
    const size_t block = variable.BlockID();
    if (v.kind == 'l')
    {
        if (block == kNoBlock)
            throw std::invalid_argument("nvs engine: variable " + variable.Name() +
                                        " is a local array: read it a block at a time "
                                        "(SetBlockSelection, or a block Selection)");
        if (!variable.Start().empty())
            throw std::invalid_argument("nvs engine: variable " + variable.Name() +
                                        ": a box within a block of a local array is not supported");
        // The caller's buffer holds Count() elements (ADIOS2's contract), and ADIOS2 2.12
        // does not let a plugin engine make Count() follow a block selection: a block of
        // another size is refused, never written past the buffer.
        if (block < v.blocks.size() && v.blocks[block].count != variable.Count())
            throw std::invalid_argument(
                "nvs engine: variable " + variable.Name() + ": block " + std::to_string(block) +
                " has count {" + DimsText(v.blocks[block].count) + "}, the variable's Count() is {" +
                DimsText(variable.Count()) + "} (ADIOS2 2.12 does not let a plugin engine set it "
                "from SetBlockSelection): SetSelection({{}, {" + DimsText(v.blocks[block].count) +
                "}}) after SetBlockSelection, or a block Selection");
        GetBlock(variable, values, block);
        return;
    }
    if (block != kNoBlock && v.kind != 'v')
        throw std::invalid_argument(
            "nvs engine: variable " + variable.Name() +
            ": SetBlockSelection on a global array, then a Get without a Selection: ADIOS2 2.12 "
            "does not show a plugin engine whether the block or a later box selection is meant; "
            "pass the block as a Selection (Get(variable, data, adios2::Selection::Block(" +
            std::to_string(block) + ")))");
    GetBox(variable, values, variable.Start(), variable.Count(), nullptr, nullptr);
}

template <class T>
void NvsEngine::GetSel(adios2::Variable<T> &variable, T *values, const adios2::core::Selection &sel)
{
    if (sel.GetStepCount() > 1)
        throw std::invalid_argument("nvs engine: reads one step at a time (a step selection of " +
                                    std::to_string(sel.GetStepCount()) + ")");
    if (sel.HasBlockSelection())
    {
        if (sel.HasMemorySelection() ||
            sel.GetSelectionType() == adios2::SelectionType::BoundingBox)
            throw std::invalid_argument("nvs engine: variable " + variable.Name() +
                                        ": a box or memory selection within a block is not supported");
        GetBlock(variable, values, sel.GetBlockID());
        return;
    }
    const bool box = sel.GetSelectionType() == adios2::SelectionType::BoundingBox;
    GetBox(variable, values, box ? sel.GetStart() : adios2::Dims{}, box ? sel.GetCount() : adios2::Dims{},
           sel.HasMemorySelection() ? &sel.GetMemoryStart() : nullptr,
           sel.HasMemorySelection() ? &sel.GetMemoryCount() : nullptr);
}

#define declare(T)                                                                                 \
    void NvsEngine::DoPutSync(adios2::Variable<T> variable, const T *values)                       \
    {                                                                                              \
        Put(variable, values, false); /* copied now: the caller's buffer is free at once */       \
    }                                                                                              \
    void NvsEngine::DoPutDeferred(adios2::Variable<T> variable, const T *values)                   \
    {                                                                                              \
        Put(variable, values, true); /* stored from the caller's buffer at EndStep */             \
    }                                                                                              \
    void NvsEngine::DoGetSync(adios2::Variable<T> variable, T *values) { GetVar(variable, values); } \
    void NvsEngine::DoGetDeferred(adios2::Variable<T> variable, T *values)                         \
    {                                                                                              \
        GetVar(variable, values); /* the step is committed: read now */                           \
    }                                                                                              \
    void NvsEngine::DoGetSync(adios2::Variable<T> variable, T *values,                             \
                              const adios2::core::Selection &sel)                                  \
    {                                                                                              \
        GetSel(variable, values, sel);                                                             \
    }                                                                                              \
    void NvsEngine::DoGetDeferred(adios2::Variable<T> variable, T *values,                         \
                                  const adios2::core::Selection &sel)                              \
    {                                                                                              \
        GetSel(variable, values, sel);                                                             \
    }
ADIOS2_FOREACH_PRIMITIVE_STDTYPE_1ARG(declare)
#undef declare

/* Span puts (the engine lending its buffer) are not offered: every Put copies. */
#define declare(T)                                                                                 \
    void NvsEngine::DoPut(adios2::Variable<T> variable, typename adios2::Variable<T>::Span &,      \
                          const bool, const T &)                                                   \
    {                                                                                              \
        throw std::invalid_argument("nvs engine: span puts are not supported (variable " +         \
                                    variable.Name() + "): Put the values instead");                \
    }
ADIOS2_FOREACH_PRIMITIVE_STDTYPE_1ARG(declare)
#undef declare

/* Strings are not stored (yet). */
void NvsEngine::DoPutSync(adios2::Variable<std::string> v, const std::string *)
{
    throw std::invalid_argument("nvs engine: string variables are not supported (" + v.Name() + ")");
}
void NvsEngine::DoPutDeferred(adios2::Variable<std::string> v, const std::string *s)
{
    DoPutSync(v, s);
}
void NvsEngine::DoGetSync(adios2::Variable<std::string> v, std::string *)
{
    throw std::invalid_argument("nvs engine: string variables are not supported (" + v.Name() + ")");
}
void NvsEngine::DoGetDeferred(adios2::Variable<std::string> v, std::string *s) { DoGetSync(v, s); }
void NvsEngine::DoGetSync(adios2::Variable<std::string> v, std::string *s,
                          const adios2::core::Selection &)
{
    DoGetSync(v, s);
}
void NvsEngine::DoGetDeferred(adios2::Variable<std::string> v, std::string *s,
                              const adios2::core::Selection &)
{
    DoGetSync(v, s);
}

} // namespace nvs_adios2

extern "C" {

adios2::plugin::PluginEngineInterface *EngineCreate(adios2::IO io, const std::string &name,
                                                    const adios2::Mode mode)
{
    return new nvs_adios2::NvsEngine(io, name, mode);
}

void EngineDestroy(adios2::plugin::PluginEngineInterface *obj) { delete obj; }
}
