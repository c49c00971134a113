/* nvs-adios2: the engine (see NvsEngine.h for what it stores and its parameters). */
#include "NvsEngine.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cmath>
#include <complex>
#include <fcntl.h>
#include <cstring>
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

[[noreturn]] void Fail(const std::string &what, int32_t rc)
{
    throw std::runtime_error("nvs engine: " + what + ": " + nvs_status_name(rc) + ": " +
                             nvs_last_error());
}

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

/* A buffer of `n` zero bytes, or a clear error where std::bad_alloc would say nothing. */
std::vector<char> Buffer(size_t n, const std::string &what)
{
    try
    {
        return std::vector<char>(n, 0);
    }
    catch (const std::bad_alloc &)
    {
        throw std::runtime_error("nvs engine: " + what + ": cannot allocate " + std::to_string(n) +
                                 " bytes for it");
    }
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

NvsEngine::NvsEngine(adios2::IO io, const std::string &name, const adios2::Mode mode)
: PluginEngineInterface(io, name, mode)
{
    m_PoolPath = Param("PoolPath", "");
    if (m_PoolPath.empty())
        throw std::invalid_argument("nvs engine: the parameter PoolPath is required (the pool "
                                    "file; the engine does not see the name given to Open: two "
                                    "outputs need two PoolPaths)");
    m_EndStream = ParseBool("EndStream", Param("EndStream", "true"));
    m_Timeout = ParseSeconds("Timeout", Param("Timeout", "-1"));
    m_OpenTimeout = ParseSeconds("OpenTimeout", Param("OpenTimeout", "60"));
    switch (mode)
    {
    case adios2::Mode::Write:
    case adios2::Mode::Append:
        m_Writer = true;
        OpenWriter();
        break;
    case adios2::Mode::Read:
        OpenReader();
        break;
    default:
        throw std::invalid_argument("nvs engine: only the modes Write, Append and Read (streaming)");
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

void NvsEngine::OpenWriter()
{
    // Every parameter is checked before anything on disk changes.
    const uint64_t size = ParseSize(Param("PoolSize", "256M"));
    struct stat st;
    int32_t rc;
    const bool exists = ::stat(m_PoolPath.c_str(), &st) == 0;
    if (m_OpenMode == adios2::Mode::Write && exists && S_ISREG(st.st_mode))
    {
        // Write starts a new stream, as BP5 replaces its output: the new pool is made
        // beside the old one and renamed over it, so a Write that fails (no room, a bad
        // size) leaves the old pool as it was. Followers of the old file see it replaced.
        // Never under a live writer of it (another rank of this job writing the same
        // output, another engine of this process, another run): its steps would go on into
        // a file no name reaches any more, silently lost. Its writer's locks (nvs's: OFD
        // write locks on the pool's first bytes) are taken here until the new pool is in
        // place, so two Writes cannot replace each other's either.
        const int held = ::open(m_PoolPath.c_str(), O_RDWR | O_CLOEXEC);
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
                    "nvs engine: Write: " + m_PoolPath +
                    " is being written by a live writer (another rank of this job writing the same "
                    "output, another engine or another run): refused, nothing changed. Each writer "
                    "process needs its own pool (PoolPath); several "
                    "ranks writing one output are not supported by this engine yet (BP5 does it)");
            throw std::runtime_error("nvs engine: Write: cannot open " + m_PoolPath + " to replace it: " +
                                     std::strerror(e));
        }
        const std::string fresh = m_PoolPath + ".nvs-new-" + std::to_string(::getpid());
        rc = nvs_pool_create(fresh.c_str(), size, nullptr, &m_Pool);
        if (rc != NVS_OK)
        {
            ::close(held);
            Fail("create " + m_PoolPath, rc);
        }
        rc = nvs_pool_close(m_Pool);
        m_Pool = nullptr;
        if (rc != NVS_OK || ::rename(fresh.c_str(), m_PoolPath.c_str()) != 0)
        {
            const std::string why = rc != NVS_OK ? nvs_last_error() : std::strerror(errno);
            ::unlink(fresh.c_str());
            ::close(held);
            throw std::runtime_error("nvs engine: Write: cannot replace " + m_PoolPath + ": " + why);
        }
        ::close(held);
    }
    else if (m_OpenMode == adios2::Mode::Write && exists && !S_ISCHR(st.st_mode))
        throw std::invalid_argument("nvs engine: Write: " + m_PoolPath +
                                    " is neither a regular file nor a device");
    else if (m_OpenMode == adios2::Mode::Write && exists)
    {
        // A device (device-DAX) is formatted in place: the new stream fills it.
        rc = nvs_pool_create(m_PoolPath.c_str(), size, nullptr, &m_Pool);
        if (rc != NVS_OK)
            Fail("create " + m_PoolPath, rc);
        return;
    }
    if (::stat(m_PoolPath.c_str(), &st) == 0)
    {
        rc = nvs_pool_open(m_PoolPath.c_str(), NVS_OPEN_READ_WRITE, &m_Pool);
        if (rc != NVS_OK)
            Fail("open " + m_PoolPath, rc);
        uint64_t latest = 0;
        rc = nvs_latest(m_Pool, kStepIndex, &latest);
        if (rc == NVS_OK)
            m_Step = latest; // steps 0..latest-1 are committed: append after them
        else if (rc != NVS_E_NOT_FOUND)
            Fail("open " + m_PoolPath, rc);
    }
    else
    {
        rc = nvs_pool_create(m_PoolPath.c_str(), size, nullptr, &m_Pool);
        if (rc != NVS_OK && ::stat(m_PoolPath.c_str(), &st) == 0)
            Fail("create " + m_PoolPath + " (another writer created it meanwhile: another rank of "
                 "this job writing the same output? each writer process needs its own PoolPath)",
                 rc);
        if (rc != NVS_OK)
            Fail("create " + m_PoolPath, rc);
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
    for (;;)
    {
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
                                         "new stream) " +
                                         (m_AnyStep ? "after step " + std::to_string(m_Step)
                                                    : "before any step") +
                                         "; open it again to read the new stream");
        }
        if (rc != NVS_OK)
            Fail("follow " + m_PoolPath, rc);
        if (ev.kind == NVS_EVENT_TIMEOUT && !last)
            continue;
        switch (ev.kind)
        {
        case NVS_EVENT_OBJECT:
            break;
        case NVS_EVENT_END_OF_STREAM:
            return adios2::StepStatus::EndOfStream;
        case NVS_EVENT_WRITER_GONE:
            throw std::runtime_error(
                "nvs engine: the writer of " + m_PoolPath +
                " died (no writer holds the pool and its stream was not ended)" +
                (m_AnyStep ? " after step " + std::to_string(m_Step) : " before any step"));
        case NVS_EVENT_TIMEOUT:
            return adios2::StepStatus::NotReady;
        default:
            throw std::runtime_error("nvs engine: unknown follower event " + std::to_string(ev.kind));
        }
        if (std::strcmp(ev.name, kStepIndex) != 0)
            continue; // a variable's object: its step's index follows in the same commit

        // the step's index: every variable of the step is committed with it
        std::vector<char> text(ev.len);
        size_t len = 0;
        rc = nvs_follower_get(m_Follower, kStepIndex, ev.version, text.data(), text.size(), &len);
        if (rc != NVS_OK)
            Fail("read the index of step " + std::to_string(ev.version - 1), rc);
        m_Step = ev.version - 1;
        m_AnyStep = true;
        m_Order.clear();
        m_Vars.clear();
        std::stringstream lines(std::string(text.data(), len));
        std::string line;
        while (std::getline(lines, line))
        {
            if (line.empty())
                continue;
            std::stringstream fields(line);
            std::string name, dtype, shape, rest;
            StepVar v;
            if (!std::getline(fields, name, '\t') || !std::getline(fields, dtype, '\t') ||
                (std::getline(fields, shape, '\t') && std::getline(fields, rest)) ||
                !ParseDims(shape, v.shape) || m_Vars.count(name))
                throw std::runtime_error("nvs engine: the index of step " + std::to_string(m_Step) +
                                         " in " + m_PoolPath + " is damaged (the line \"" + line +
                                         "\")");
            v.dtype = dtype;
            m_Order.push_back(name);
            m_Vars[name] = std::move(v);
        }
        DefineReadVariables();
        m_InStep = true;
        return adios2::StepStatus::OK;
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
            if (sv.shape.empty())                                                                  \
                m_IO.DefineVariable<T>(name);                                                      \
            else                                                                                   \
                m_IO.DefineVariable<T>(name, sv.shape, adios2::Dims(sv.shape.size(), 0),           \
                                       sv.shape);                                                  \
        }                                                                                          \
        else if (!sv.shape.empty())                                                                \
        {                                                                                          \
            /* each step starts with the whole array selected, as with BP5 */                      \
            if (v.Shape() != sv.shape)                                                             \
                v.SetShape(sv.shape);                                                              \
            v.SetSelection({adios2::Dims(sv.shape.size(), 0), sv.shape});                         \
        }                                                                                          \
    }
        NVS_DTYPES(X)
#undef X
        if (!known)
            throw std::runtime_error("nvs engine: variable " + name + " has dtype " + sv.dtype +
                                     ", not one this engine reads");
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
        return;
    }
    // Attributes are not stored (yet): a reader would never see them.
    if (!m_IO.AvailableAttributes().empty())
        throw std::invalid_argument("nvs engine: the IO defines " +
                                    std::to_string(m_IO.AvailableAttributes().size()) +
                                    " attribute(s) (first: " + m_IO.AvailableAttributes().begin()->first +
                                    "): attributes are not stored by this engine yet, and a reader "
                                    "would not see them; nothing of step " + std::to_string(m_Step) +
                                    " was committed");
    // one batch: every variable of the step, then the step's index; one commit
    const uint64_t version = m_Step + 1;
    std::vector<std::string> metas;
    metas.reserve(m_Order.size());
    std::string index;
    std::vector<nvs_object> objs(m_Order.size() + 1);
    for (size_t i = 0; i < m_Order.size(); ++i)
    {
        const StepVar &v = m_Vars[m_Order[i]];
        metas.push_back("dtype=" + v.dtype + "\nshape=" + DimsText(v.shape) + "\n");
        index += m_Order[i] + "\t" + v.dtype + "\t" + DimsText(v.shape) + "\n";
        nvs_object &o = objs[i];
        std::memset(&o, 0, sizeof o);
        o.name = m_Order[i].c_str();
        o.data = v.data.data();
        o.len = v.data.size();
        o.version = version;
        o.meta = metas.back().data();
        o.meta_len = metas.back().size();
    }
    const std::string indexMeta = "adios2_step=" + std::to_string(m_Step) + "\n";
    nvs_object &o = objs.back();
    std::memset(&o, 0, sizeof o);
    o.name = kStepIndex;
    o.data = index.data();
    o.len = index.size();
    o.version = version;
    o.meta = indexMeta.data();
    o.meta_len = indexMeta.size();
    int32_t rc = nvs_put_batch(m_Pool, 0, objs.data(), objs.size(), nullptr);
    if (rc != NVS_OK)
        Fail("commit step " + std::to_string(m_Step), rc);
    m_Vars.clear();
    m_Order.clear();
    ++m_Step;
}

size_t NvsEngine::CurrentStep() const { return m_Step; }

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

template <class T>
void NvsEngine::Put(adios2::Variable<T> &variable, const T *values)
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
    adios2::Dims shape = variable.Shape();
    adios2::Dims start = variable.Start();
    adios2::Dims count = variable.Count();
    const bool local = shape.empty() && !count.empty();
    if (local)
    {
        // a local array: stored as one block of its own shape
        if (m_Vars.count(name))
            throw std::invalid_argument("nvs engine: local array " + name +
                                        ": one block per step (a second Put in this step)");
        shape = count;
        start.assign(count.size(), 0);
    }
    if (start.empty())
        start.assign(shape.size(), 0);
    if (count.empty())
        count = shape;
    CheckBox(name, start, count, shape);

    auto it = m_Vars.find(name);
    if (it == m_Vars.end())
    {
        StepVar v;
        v.dtype = DType<T>::str();
        v.shape = shape;
        v.elemSize = sizeof(T);
        v.data = Buffer(Bytes(shape, sizeof(T), "variable " + name), "variable " + name);
        it = m_Vars.emplace(name, std::move(v)).first;
        m_Order.push_back(name);
    }
    else if (it->second.shape != shape)
        throw std::invalid_argument("nvs engine: variable " + name +
                                    " put twice in a step with different shapes");
    StepVar &v = it->second;
    const adios2::Dims zero(shape.size(), 0);
    CopyBox(sizeof(T), start, count, reinterpret_cast<const char *>(values), start, count,
            v.data.data(), zero, shape);
}

template <class T>
void NvsEngine::Get(adios2::Variable<T> &variable, T *values, const adios2::Dims &start0,
                    const adios2::Dims &count0)
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
    if (!v.loaded)
    {
        // The object's length first: a step index that does not match the object (a
        // damaged or forged pool) is an error, not a buffer of the wrong size.
        const std::string what = "variable " + name + " of step " + std::to_string(m_Step);
        size_t len = 0;
        int32_t rc = nvs_follower_get(m_Follower, name.c_str(), m_Step + 1, nullptr, 0, &len);
        if (rc != NVS_OK)
            Fail("read " + what, rc);
        const size_t need = Bytes(v.shape, sizeof(T), what);
        if (len != need)
            throw std::runtime_error("nvs engine: " + what + ": " + std::to_string(len) +
                                     " bytes, its shape {" + DimsText(v.shape) + "} needs " +
                                     std::to_string(need));
        v.data = Buffer(need, what);
        rc = nvs_follower_get(m_Follower, name.c_str(), m_Step + 1, v.data.data(), v.data.size(), &len);
        if (rc != NVS_OK)
            Fail("read " + what, rc);
        if (len != need)
            throw std::runtime_error("nvs engine: " + what + ": changed length while read");
        v.loaded = true;
    }
    adios2::Dims start = start0, count = count0;
    if (start.empty())
        start.assign(v.shape.size(), 0);
    if (count.empty())
        count = v.shape;
    CheckBox(name, start, count, v.shape);
    const adios2::Dims zero(v.shape.size(), 0);
    CopyBox(sizeof(T), start, count, v.data.data(), zero, v.shape,
            reinterpret_cast<char *>(values), start, count);
}

template <class T>
void NvsEngine::GetVar(adios2::Variable<T> &variable, T *values)
{
    Get(variable, values, variable.Start(), variable.Count());
}

template <class T>
void NvsEngine::GetSel(adios2::Variable<T> &variable, T *values, const adios2::core::Selection &sel)
{
    if (sel.GetStepCount() > 1)
        throw std::invalid_argument("nvs engine: reads one step at a time (a step selection of " +
                                    std::to_string(sel.GetStepCount()) + ")");
    if (sel.HasMemorySelection())
        throw std::invalid_argument("nvs engine: memory selections are not supported");
    if (sel.HasBlockSelection() && sel.GetBlockID() != 0)
        throw std::invalid_argument("nvs engine: a step's variable is one block (block 0)");
    if (sel.GetSelectionType() == adios2::SelectionType::BoundingBox)
        Get(variable, values, sel.GetStart(), sel.GetCount());
    else
        Get(variable, values, {}, {});
}

#define declare(T)                                                                                 \
    void NvsEngine::DoPutSync(adios2::Variable<T> variable, const T *values)                       \
    {                                                                                              \
        Put(variable, values);                                                                     \
    }                                                                                              \
    void NvsEngine::DoPutDeferred(adios2::Variable<T> variable, const T *values)                   \
    {                                                                                              \
        Put(variable, values); /* copied now: the caller's buffer is free at once */              \
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
