/* nvs-adios2: an ADIOS2 (>= 2.12, plugin interface v2) engine over nvs's C ABI.
 *
 * Ranks. Every rank of the communicator ADIOS2 gives the engine (an MPI build of ADIOS2;
 * a serial build is one rank) writes its own lane of one pool: a pool with lane names,
 * as many lanes as ranks, rank r writing lane r (nvs_pool_open_lane). One pool, not a
 * pool per rank: a reader follows one file, sees every rank's commits in one stream,
 * and learns from nvs's per-lane locks which rank's writer died. Ranks never wait for
 * each other after Open (no collective call per step).
 *
 * Writer: BeginStep ... Put ... EndStep is one nvs_put_batch on the rank's lane (one
 * commit per rank per step): every variable the rank put in the step is an object
 * named as the variable (in the rank's name space), version step+1, holding the rank's
 * blocks one after the other (a sync Put's copied at the Put, a deferred Put's stored
 * from the caller's buffer at EndStep, or copied at PerformPuts); the batch ends with the rank's step index
 * "__adios2_step" (version step+1): a line "nvs-adios2 2 RANKS RANK", then per variable
 * "v NAME DTYPE KIND SHAPE" and per block "b START COUNT OFFSET BYTES MIN MAX"
 * (tab-separated; MIN and MAX the block's extreme elements in hex).
 * Reader: follows the pool (nvs_follower_*); step S is there once every rank's index of
 * S is (a rank's step is one commit, so a reader never sees part of one); a step some
 * rank never committed and went on past (it died, and the job was restarted with
 * Append) is skipped, as BP5 has no trace of it either. A box selection is assembled
 * from the blocks of every rank it meets.
 *
 * Modes: Write starts a new pool (an existing file at PoolPath is replaced, as BP5
 * replaces its output: the new pool is made beside it and renamed over it, so a Write
 * that fails leaves the old pool whole; a reader of the old one gets an error saying it
 * was replaced; never while a live writer holds it: refused); Append opens the pool (or
 * creates it) and continues after the last step any rank committed; Read follows the
 * pool as a stream. Rank 0 makes the pool; every rank learns the outcome before any
 * opens its lane, so one failing rank fails them all with the same message.
 *
 * Parameters (engine type="Plugin", PluginName="nvs", PluginLibrary="nvs_adios2"),
 * checked before anything on disk changes:
 *   PoolPath     the pool file (required: a plugin engine is not told the name given to
 *                Open, so two outputs need two PoolPaths; a second Write of one PoolPath
 *                in one process is refused rather than replacing the first output)
 *   Replace      Write: true lets a process replace a PoolPath it wrote before (a restart
 *                file rewritten); default false
 *   KeepSteps    writer: K > 0 bounds a long stream: when a step does not fit, each rank
 *                releases its oldest segments holding only steps older than its last K
 *                and commits the step (nvs_reclaim); default 0, every step kept (a full
 *                pool is an error)
 *   PoolSize     a new pool's size in bytes, suffixes K/M/G/T (writer; default 256M)
 *   EndStream    writer Close: true (default) ends the stream, false detaches
 *                (followers wait for a restarted writer); true/false, on/off, yes/no, 1/0
 *   Timeout      reader: seconds BeginStep waits when called without a timeout
 *                (default -1; negative or inf: as long as it takes; a dead writer is an
 *                error anyway)
 *   OpenTimeout  reader: seconds Open waits for the pool file to appear or be formatted
 *                (default 60; negative or inf: as long as it takes); a file that is
 *                there and is not a pool is an error at once
 *
 * Served: global arrays (any number of blocks per rank and step), local arrays, global
 * values (rank 0's), local values (read as a 1-D array, one per rank), box selections,
 * block selections and memory selections passed to Get as an adios2::Selection,
 * BlocksInfo (start, count, min, max per block), attributes (rank 0's, with each step).
 * Refused at the call, naming it: span puts, operators, string variables, a step
 * selection of several steps, Steps() (ADIOS2 opens a plugin engine in Read mode when
 * ReadRandomAccess is asked for: a stream does not know it), a SetBlockSelection followed
 * by a Get without a Selection on a global array (ADIOS2 2.12 does not show a plugin
 * engine which of a block and a box selection was made last) or on a local array's block
 * whose count is not the variable's Count() (the caller's buffer holds Count()). An Open
 * for writing by some ranks of MPI_COMM_WORLD only (ADIOS2 2.12 does not give a plugin
 * engine its communicator): an error after OpenTimeout, nothing changed. Not shown to a
 * plugin engine at all, so neither served nor refusable: a writer's SetMemorySelection (the values are read as if
 * there were none) and a reader's (use a Get with a Selection instead). AvailableVariables
 * lists every variable the stream has had, not only the current step's (a Get of one the
 * step lacks is an error naming the step).
 */
#ifndef NVS_ADIOS2_NVSENGINE_H_
#define NVS_ADIOS2_NVSENGINE_H_

#include <adios2/plugin/PluginEngineInterface.h>

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nvs.h"

#if NVS_ADIOS2_MPI
#include <mpi.h>
#endif

namespace nvs_adios2
{

/** One block of a variable: where it lies in the global array (local arrays: count
 * only; values: neither), where its bytes are in its rank's object, and its extremes. */
struct Block
{
    uint32_t rank = 0;
    adios2::Dims start, count;
    size_t offset = 0, bytes = 0;
    std::string min, max; // the extreme elements' bytes (empty: none)
    // writer: where the bytes are until EndStep: a deferred Put's caller's buffer (valid
    // until EndStep or PerformPuts, by ADIOS2's contract), else the variable's data at `at`
    const char *ext = nullptr;
    size_t at = 0;
};

/** One variable of one step: its numpy dtype, kind ('g' global array, 'l' local array,
 * 'v' global value, 'r' local value), global shape and blocks; a writer's own bytes. */
struct StepVar
{
    std::string dtype;
    char kind = 'g';
    adios2::Dims shape;
    size_t elemSize = 0;
    std::vector<Block> blocks; // writer: this rank's; reader: every rank's, in rank order
    std::vector<char> data;    // writer: the blocks of sync Puts (and PerformPuts')
    size_t total = 0;          // writer: the bytes of every block
};

/** An attribute as a step's index holds it: its dtype ("string" for strings), whether
 * it is a single value, and its elements' bytes (strings: one element each). */
struct Attr
{
    std::string dtype;
    bool value = false;
    std::vector<std::string> elems;
};

/** An object read whole (uninitialised until read: no zeroing of what is overwritten). */
struct Loaded
{
    std::unique_ptr<char[]> p;
    size_t n = 0;
    const char *data() const { return p.get(); }
    size_t size() const { return n; }
};

/** One rank's index of one step, as a reader parsed it. */
struct RankStep
{
    uint32_t ranks = 0;
    std::map<std::string, Attr> attrs; // rank 0's: the IO's attributes at that step
    std::vector<std::string> order;
    std::map<std::string, StepVar> vars;
};

class NvsEngine : public adios2::plugin::PluginEngineInterface
{
public:
    NvsEngine(adios2::IO io, const std::string &name, const adios2::Mode mode);
    ~NvsEngine() override;

    adios2::StepStatus BeginStep(adios2::StepMode mode, const float timeoutSeconds = -1.0f) override;
    void EndStep() override;
    size_t CurrentStep() const override;
    size_t Steps() const override;
    void PerformPuts() override;
    void PerformGets() override {}
    void DoClose(const int transportIndex = -1) override;
    adios2::MinVarInfo *MinBlocksInfo(const std::string &varName, const size_t step) const override;

#define declare(T)                                                                                 \
    void DoPutSync(adios2::Variable<T> variable, const T *values) override;                        \
    void DoPutDeferred(adios2::Variable<T> variable, const T *values) override;                    \
    void DoGetSync(adios2::Variable<T> variable, T *values) override;                              \
    void DoGetDeferred(adios2::Variable<T> variable, T *values) override;                          \
    void DoGetSync(adios2::Variable<T> variable, T *values, const adios2::core::Selection &sel)    \
        override;                                                                                  \
    void DoGetDeferred(adios2::Variable<T> variable, T *values,                                    \
                       const adios2::core::Selection &sel) override;
    ADIOS2_FOREACH_STDTYPE_1ARG(declare)
#undef declare

#define declare(T)                                                                                 \
    void DoPut(adios2::Variable<T> variable, typename adios2::Variable<T>::Span &span,             \
               const bool initialize, const T &value) override;
    ADIOS2_FOREACH_PRIMITIVE_STDTYPE_1ARG(declare)
#undef declare

private:
    uint32_t m_Rank = 0, m_Ranks = 1; // writer: this rank and the communicator's size
    bool m_Writer = false;
    bool m_InStep = false;
    bool m_Closed = false;
    bool m_EndStream = true;
    uint32_t m_KeepSteps = 0; // writer: when the pool is full, keep the last this many steps
    size_t m_Step = 0;      // the current (or next) step
    bool m_AnyStep = false; // reader: a step was begun
    std::string m_PoolPath;
    double m_Timeout = -1;     // seconds; negative: as long as it takes
    double m_OpenTimeout = 60; // seconds; negative: as long as it takes
    dev_t m_Dev = 0;           // reader: the followed file (a Write replaces PoolPath's)
    ino_t m_Ino = 0;

    nvs_pool *m_Pool = nullptr;         // writer
    nvs_follower *m_Follower = nullptr; // reader
    std::vector<std::string> m_Order;   // the step's variables, in put order
    std::map<std::string, StepVar> m_Vars;
    std::map<std::string, Attr> m_Attrs;     // reader: the attributes defined in the IO
    std::map<std::string, Attr> m_StepAttrs; // reader: the step being begun's

    // reader
    std::map<uint64_t, std::map<uint32_t, RankStep>> m_Pending; // step -> rank -> index
    std::map<uint32_t, uint64_t> m_LaneLast;              // rank -> its last step seen
    uint32_t m_Expected = 1;                              // lanes declared to the follower
    std::map<std::pair<uint32_t, std::string>, Loaded> m_Loaded; // the step's objects read whole
    /* A block read straight into the caller's buffer (`Direct`), run by `ReadDirect`. */
    struct DirectRead
    {
        uint32_t rank;
        char *dst;
        size_t bytes;
    };
    template <class T>
    bool Direct(const std::string &name, const Block &b, const adios2::Dims &lo,
                const adios2::Dims &n, T *values, const adios2::Dims &dstOrigin,
                const adios2::Dims &dstExt, const std::string &what, DirectRead &out);
    void ReadDirect(const std::string &name, std::vector<DirectRead> &reads, const std::string &what);


    void Collective(const std::string &error);
#if NVS_ADIOS2_MPI
    void Allreduce(void *in, void *out, MPI_Datatype type);
#endif
    bool ServeReady();
    void TakeIndex(uint32_t lane, uint64_t version, size_t len);
    const Loaded &Object(const std::string &name, uint32_t rank, const std::string &what);
    void CheckBlocks(const std::string &name, uint32_t rank, size_t len, const std::string &what);
    [[noreturn]] void ReadFailed(const std::string &what, uint32_t rank, int32_t rc);
    [[noreturn]] void ReadFailed(const std::string &what, uint32_t rank, int32_t rc, const std::string &error);

    std::string Param(const std::string &key, const std::string &def) const;
    void OpenWriter();
    void OpenReader();
    void DefineReadVariables();
    std::string AttributeLines();
    void DefineReadAttributes(const std::map<std::string, Attr> &attrs);
    template <class T>
    void Put(adios2::Variable<T> &variable, const T *values, bool deferred);
    template <class T>
    StepVar &ReadVar(adios2::Variable<T> &variable);
    template <class T>
    void GetBox(adios2::Variable<T> &variable, T *values, adios2::Dims start, adios2::Dims count,
                const adios2::Dims *memStart, const adios2::Dims *memCount);
    template <class T>
    void GetBlock(adios2::Variable<T> &variable, T *values, size_t block);
    template <class T>
    void GetVar(adios2::Variable<T> &variable, T *values);
    template <class T>
    void GetSel(adios2::Variable<T> &variable, T *values, const adios2::core::Selection &sel);
};

} // namespace nvs_adios2

#endif
