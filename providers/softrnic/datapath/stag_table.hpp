// The data path's STag table is the one both providers share; softrnic's code names it in its own namespace.
#ifndef SOFTRNIC_DATAPATH_STAG_TABLE_HPP
#define SOFTRNIC_DATAPATH_STAG_TABLE_HPP

#include "common/stag_table.hpp"

namespace softrnic::datapath {

using providers::common::StagCache;
using providers::common::StagEntry;
using providers::common::StagTable;

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_STAG_TABLE_HPP
