// Linker maps as a symbol source (gmon/linker_map.h): GNU ld's layout as arm-none-eabi-ld
// writes it for target-fw (copied from a real map), and TI's as its ARM linker writes it.
#include "gmon/linker_map.h"

#include <doctest/doctest.h>

#include <string>

namespace rackprof::gmon {
namespace {

// From build/target-fw/nested-mps2-an385-framed.map (arm-none-eabi-ld 2.40), cut short.
constexpr const char* kGnuMap = R"(Archive member included to satisfy reference by file (symbol)

Discarded input sections

 .text          0x00000000        0x0 CMakeFiles/nested.dir/examples/nested.c.obj
 .text.rackprof_puts
                0x00000000       0x10 librackprof_rt.a(runtime.c.obj)

Memory Configuration

Name             Origin             Length             Attributes
FLASH            0x00000000         0x00400000         xr

Linker script and memory map

.text           0x00000000      0x98c
                0x00000000                        __text_start = .
 *(.vectors.core)
 .vectors.core  0x00000000       0x40 librackprof_rt.a(startup.c.obj)
 *(.text .text.*)
 .text.leaf     0x00000064       0x14 CMakeFiles/nested.dir/examples/nested.c.obj
                0x00000064                leaf
 .text.app_timer_isr
                0x00000098        0xe CMakeFiles/nested.dir/examples/nested.c.obj
                0x00000098                app_timer_isr
 *fill*         0x000000a6        0x2 
 .text.startup.main
                0x000000dc       0x58 CMakeFiles/nested.dir/examples/nested.c.obj
                0x000000dc                main
 .text          0x00000134       0x28 librackprof_rt.a(mcount.S.obj)
                0x00000134                __gnu_mcount_nc
                0x00000148                mcount_tail
 .text.put_le   0x00000312       0x10 librackprof_rt.a(framed.c.obj)
 .data          0x20000000        0x4 CMakeFiles/nested.dir/examples/nested.c.obj
                0x20000000                sink

OUTPUT(nested-mps2-an385-framed.elf elf32-littlearm)
)";

// TI ARM linker (armcl 20.2) layout, a TM4C1294 FreeRTOS project's, cut short.
constexpr const char* kTiMap =
    R"(******************************************************************************
                  TI ARM Linker PC v20.2.5                     
******************************************************************************
>> Linked Tue Mar 13 10:12:44 2018

OUTPUT FILE NAME:   <EECS690_Profiler.out>
ENTRY POINT SYMBOL: "_c_int00_noargs"  address: 00003a15


MEMORY CONFIGURATION

         name            origin    length      used     unused   attr    fill
----------------------  --------  ---------  --------  --------  ----  --------
  FLASH                 00000000   00100000  00003f42  000fc0be  R  X


SECTION ALLOCATION MAP

 output                                  attributes/
section   page    origin      length       input sections
--------  ----  ----------  ----------   ----------------
.intvecs   0    00000000    00000200     
                  00000000    00000200     tm4c1294ncpdt_startup_ccs.obj (.intvecs)

.text      0    00000200    00003a1c     
                  00000200    00000a80     tasks.obj (.text)
                  00000c80    00000180     Task_ProgramTrace.obj (.text:Task_ProgramTrace)
                  00000e00    00000048     main.obj (.text:main)
                  00000e48    00000020     main.obj (.text:report_histogram_data)

.const     0    00003c1c    00000100     
                  00003c1c    00000100     main.obj (.const:g_pui8Names)


GLOBAL SYMBOLS: SORTED ALPHABETICALLY BY Name 

address   name                          
-------   ----                          
00000e01  main                          


GLOBAL SYMBOLS: SORTED BY Symbol Address 

address   name                          
-------   ----                          
00000000  __TI_static_base__            
00000201  xTaskCreate                   
00000641  vTaskDelay                    
00000c81  Task_ProgramTrace             
00000e01  main                          
00003c1c  g_pui8Names                   

[6 symbols]
)";

const ElfSymbol* find(const LinkerMap& map, const std::string& name) {
    for (const ElfSymbol& s : map.symbols)
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace

TEST_CASE("a GNU ld map: code symbols, sizes from sections, statics from section names") {
    CHECK(looks_like_linker_map(kGnuMap));
    const LinkerMap map = parse_linker_map(kGnuMap);
    CHECK(map.flavor == "GNU ld");
    CHECK(map.machine == 40);
    CHECK(map.text_addr == 0);
    CHECK(map.text_size == 0x98c);
    CHECK(map.code_low == 0x64);
    CHECK(map.code_high == 0x322);
    const auto expect = [&](const char* name, std::uint64_t addr, std::uint64_t size, bool global) {
        CAPTURE(name);
        const ElfSymbol* s = find(map, name);
        REQUIRE(s);
        CHECK(s->addr == addr);
        CHECK(s->size == size);
        CHECK(s->global == global);
        CHECK(s->thumb);
        CHECK(s->function);
    };
    expect("leaf", 0x64, 0x14, true);
    expect("app_timer_isr", 0x98, 0xe, true);      // the section name on a line of its own
    expect("main", 0xdc, 0x58, true);              // .text.startup.main
    expect("__gnu_mcount_nc", 0x134, 0x14, true);  // to the next symbol in its section
    expect("mcount_tail", 0x148, 0x14, true);
    expect("put_le", 0x312, 0x10, false);     // a static function: its section's name
    CHECK_FALSE(find(map, "sink"));           // data
    CHECK_FALSE(find(map, "rackprof_puts"));  // discarded
    CHECK_FALSE(find(map, "__text_start"));   // an assignment
}

TEST_CASE("a TI ARM linker map: odd addresses are Thumb functions, .text:NAME gives sizes") {
    CHECK(looks_like_linker_map(kTiMap));
    const LinkerMap map = parse_linker_map(kTiMap);
    CHECK(map.flavor == "TI");
    CHECK(map.machine == 40);
    CHECK(map.text_addr == 0x200);
    CHECK(map.text_size == 0x3a1c);
    REQUIRE(find(map, "xTaskCreate"));
    CHECK(find(map, "xTaskCreate")->addr == 0x200);
    CHECK(find(map, "xTaskCreate")->size == 0x440);  // to the next symbol in tasks.obj's .text
    CHECK(find(map, "vTaskDelay")->size == 0x640);   // to its section's end
    CHECK(find(map, "Task_ProgramTrace")->addr == 0xc80);
    CHECK(find(map, "Task_ProgramTrace")->size == 0x180);
    CHECK(find(map, "main")->size == 0x48);
    REQUIRE(find(map, "report_histogram_data"));  // static: no global symbol, its section
    CHECK_FALSE(find(map, "report_histogram_data")->global);
    CHECK_FALSE(find(map, "g_pui8Names"));
    CHECK_FALSE(find(map, "__TI_static_base__"));
}

TEST_CASE("a symbol line under a section it is not in is not that section's (found by fuzzing)") {
    const LinkerMap map = parse_linker_map(
        "Linker script and memory map\n"
        " .text          0x00000134       0x28 mcount.S.obj\n"
        "                0x00000134                __gnu_mcount_nc\n"
        "                0x00000014                leaf\n");
    REQUIRE(map.symbols.size() == 1);
    CHECK(map.symbols[0].name == "__gnu_mcount_nc");
    CHECK(map.symbols[0].size == 0x28);
}

TEST_CASE("text that is no map, and a map without code, are clear errors") {
    CHECK_FALSE(looks_like_linker_map("DONE COLLECTING (1)\n"));
    CHECK_THROWS_WITH_AS(parse_linker_map("hello\n"), doctest::Contains("not a linker map"),
                         LinkerMapError);
    CHECK_THROWS_WITH_AS(parse_linker_map("Linker script and memory map\n\n.data 0x0 0x4\n"),
                         doctest::Contains("names no code symbol"), LinkerMapError);
}

}  // namespace rackprof::gmon
