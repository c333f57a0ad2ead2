# grid13 FIFO, retry limits 7/4: experiments/backpressure/grid13.yaml case fifo-7-4 by hand for ns-2.35
# (eight Reno clients into n84 from 0 s, the two 800 KB/s CBR floods from 12 s, 150 s, AODV).
# Run: ns grid13-fifo-7-4.tcl SEED TRACEFILE
if {$argc != 2} { puts stderr "usage: ns [info script] SEED TRACEFILE"; exit 2 }
set seed [lindex $argv 0]
set tracefile [lindex $argv 1]

# Class defaults before new Simulator (the ns2-wavelan values of the sim file).
Mac/802_11 set dataRate_ 2000000
Mac/802_11 set basicRate_ 1000000
Mac/802_11 set RTSThreshold_ 0
Mac/802_11 set ShortRetryLimit_ 7
Mac/802_11 set LongRetryLimit_ 4
Mac/802_11 set CWMin_ 31
Mac/802_11 set CWMax_ 1023
Mac/802_11 set SlotTime_ 0.000020000
Mac/802_11 set SIFS_ 0.000010000
Phy/WirelessPhy set Pt_ 0.28183815
Phy/WirelessPhy set RXThresh_ 3.652e-10
Phy/WirelessPhy set CSThresh_ 1.559e-11
Phy/WirelessPhy set CPThresh_ 10
Phy/WirelessPhy set freq_ 9.14e+08
Phy/WirelessPhy set L_ 1
Antenna/OmniAntenna set Z_ 1.5
Antenna/OmniAntenna set Gt_ 1
Antenna/OmniAntenna set Gr_ 1
Queue/DropTail/PriQueue set Prefer_Routing_Protocols 1
Agent/UDP set packetSize_ 4000

$defaultRNG seed $seed
set ns_ [new Simulator]
set tracefd [open $tracefile w]
$ns_ trace-all $tracefd
set topo [new Topography]
$topo load_flatgrid 2420 2420
create-god 169
$ns_ node-config -adhocRouting AODV -llType LL -macType Mac/802_11 \
    -ifqType Queue/DropTail/PriQueue -ifqLen 50 -antType Antenna/OmniAntenna \
    -propType Propagation/TwoRayGround -phyType Phy/WirelessPhy \
    -channel [new Channel/WirelessChannel] -topoInstance $topo \
    -agentTrace ON -routerTrace ON -macTrace ON -movementTrace OFF
for {set i 0} {$i < 169} {incr i} {
    set node_($i) [$ns_ node]
    $node_($i) random-motion 0
}
$node_(0) set X_ 10.000; $node_(0) set Y_ 10.000; $node_(0) set Z_ 0.000
$node_(1) set X_ 210.000; $node_(1) set Y_ 10.000; $node_(1) set Z_ 0.000
$node_(2) set X_ 410.000; $node_(2) set Y_ 10.000; $node_(2) set Z_ 0.000
$node_(3) set X_ 610.000; $node_(3) set Y_ 10.000; $node_(3) set Z_ 0.000
$node_(4) set X_ 810.000; $node_(4) set Y_ 10.000; $node_(4) set Z_ 0.000
$node_(5) set X_ 1010.000; $node_(5) set Y_ 10.000; $node_(5) set Z_ 0.000
$node_(6) set X_ 1210.000; $node_(6) set Y_ 10.000; $node_(6) set Z_ 0.000
$node_(7) set X_ 1410.000; $node_(7) set Y_ 10.000; $node_(7) set Z_ 0.000
$node_(8) set X_ 1610.000; $node_(8) set Y_ 10.000; $node_(8) set Z_ 0.000
$node_(9) set X_ 1810.000; $node_(9) set Y_ 10.000; $node_(9) set Z_ 0.000
$node_(10) set X_ 2010.000; $node_(10) set Y_ 10.000; $node_(10) set Z_ 0.000
$node_(11) set X_ 2210.000; $node_(11) set Y_ 10.000; $node_(11) set Z_ 0.000
$node_(12) set X_ 2410.000; $node_(12) set Y_ 10.000; $node_(12) set Z_ 0.000
$node_(13) set X_ 10.000; $node_(13) set Y_ 210.000; $node_(13) set Z_ 0.000
$node_(14) set X_ 210.000; $node_(14) set Y_ 210.000; $node_(14) set Z_ 0.000
$node_(15) set X_ 410.000; $node_(15) set Y_ 210.000; $node_(15) set Z_ 0.000
$node_(16) set X_ 610.000; $node_(16) set Y_ 210.000; $node_(16) set Z_ 0.000
$node_(17) set X_ 810.000; $node_(17) set Y_ 210.000; $node_(17) set Z_ 0.000
$node_(18) set X_ 1010.000; $node_(18) set Y_ 210.000; $node_(18) set Z_ 0.000
$node_(19) set X_ 1210.000; $node_(19) set Y_ 210.000; $node_(19) set Z_ 0.000
$node_(20) set X_ 1410.000; $node_(20) set Y_ 210.000; $node_(20) set Z_ 0.000
$node_(21) set X_ 1610.000; $node_(21) set Y_ 210.000; $node_(21) set Z_ 0.000
$node_(22) set X_ 1810.000; $node_(22) set Y_ 210.000; $node_(22) set Z_ 0.000
$node_(23) set X_ 2010.000; $node_(23) set Y_ 210.000; $node_(23) set Z_ 0.000
$node_(24) set X_ 2210.000; $node_(24) set Y_ 210.000; $node_(24) set Z_ 0.000
$node_(25) set X_ 2410.000; $node_(25) set Y_ 210.000; $node_(25) set Z_ 0.000
$node_(26) set X_ 10.000; $node_(26) set Y_ 410.000; $node_(26) set Z_ 0.000
$node_(27) set X_ 210.000; $node_(27) set Y_ 410.000; $node_(27) set Z_ 0.000
$node_(28) set X_ 410.000; $node_(28) set Y_ 410.000; $node_(28) set Z_ 0.000
$node_(29) set X_ 610.000; $node_(29) set Y_ 410.000; $node_(29) set Z_ 0.000
$node_(30) set X_ 810.000; $node_(30) set Y_ 410.000; $node_(30) set Z_ 0.000
$node_(31) set X_ 1010.000; $node_(31) set Y_ 410.000; $node_(31) set Z_ 0.000
$node_(32) set X_ 1210.000; $node_(32) set Y_ 410.000; $node_(32) set Z_ 0.000
$node_(33) set X_ 1410.000; $node_(33) set Y_ 410.000; $node_(33) set Z_ 0.000
$node_(34) set X_ 1610.000; $node_(34) set Y_ 410.000; $node_(34) set Z_ 0.000
$node_(35) set X_ 1810.000; $node_(35) set Y_ 410.000; $node_(35) set Z_ 0.000
$node_(36) set X_ 2010.000; $node_(36) set Y_ 410.000; $node_(36) set Z_ 0.000
$node_(37) set X_ 2210.000; $node_(37) set Y_ 410.000; $node_(37) set Z_ 0.000
$node_(38) set X_ 2410.000; $node_(38) set Y_ 410.000; $node_(38) set Z_ 0.000
$node_(39) set X_ 10.000; $node_(39) set Y_ 610.000; $node_(39) set Z_ 0.000
$node_(40) set X_ 210.000; $node_(40) set Y_ 610.000; $node_(40) set Z_ 0.000
$node_(41) set X_ 410.000; $node_(41) set Y_ 610.000; $node_(41) set Z_ 0.000
$node_(42) set X_ 610.000; $node_(42) set Y_ 610.000; $node_(42) set Z_ 0.000
$node_(43) set X_ 810.000; $node_(43) set Y_ 610.000; $node_(43) set Z_ 0.000
$node_(44) set X_ 1010.000; $node_(44) set Y_ 610.000; $node_(44) set Z_ 0.000
$node_(45) set X_ 1210.000; $node_(45) set Y_ 610.000; $node_(45) set Z_ 0.000
$node_(46) set X_ 1410.000; $node_(46) set Y_ 610.000; $node_(46) set Z_ 0.000
$node_(47) set X_ 1610.000; $node_(47) set Y_ 610.000; $node_(47) set Z_ 0.000
$node_(48) set X_ 1810.000; $node_(48) set Y_ 610.000; $node_(48) set Z_ 0.000
$node_(49) set X_ 2010.000; $node_(49) set Y_ 610.000; $node_(49) set Z_ 0.000
$node_(50) set X_ 2210.000; $node_(50) set Y_ 610.000; $node_(50) set Z_ 0.000
$node_(51) set X_ 2410.000; $node_(51) set Y_ 610.000; $node_(51) set Z_ 0.000
$node_(52) set X_ 10.000; $node_(52) set Y_ 810.000; $node_(52) set Z_ 0.000
$node_(53) set X_ 210.000; $node_(53) set Y_ 810.000; $node_(53) set Z_ 0.000
$node_(54) set X_ 410.000; $node_(54) set Y_ 810.000; $node_(54) set Z_ 0.000
$node_(55) set X_ 610.000; $node_(55) set Y_ 810.000; $node_(55) set Z_ 0.000
$node_(56) set X_ 810.000; $node_(56) set Y_ 810.000; $node_(56) set Z_ 0.000
$node_(57) set X_ 1010.000; $node_(57) set Y_ 810.000; $node_(57) set Z_ 0.000
$node_(58) set X_ 1210.000; $node_(58) set Y_ 810.000; $node_(58) set Z_ 0.000
$node_(59) set X_ 1410.000; $node_(59) set Y_ 810.000; $node_(59) set Z_ 0.000
$node_(60) set X_ 1610.000; $node_(60) set Y_ 810.000; $node_(60) set Z_ 0.000
$node_(61) set X_ 1810.000; $node_(61) set Y_ 810.000; $node_(61) set Z_ 0.000
$node_(62) set X_ 2010.000; $node_(62) set Y_ 810.000; $node_(62) set Z_ 0.000
$node_(63) set X_ 2210.000; $node_(63) set Y_ 810.000; $node_(63) set Z_ 0.000
$node_(64) set X_ 2410.000; $node_(64) set Y_ 810.000; $node_(64) set Z_ 0.000
$node_(65) set X_ 10.000; $node_(65) set Y_ 1010.000; $node_(65) set Z_ 0.000
$node_(66) set X_ 210.000; $node_(66) set Y_ 1010.000; $node_(66) set Z_ 0.000
$node_(67) set X_ 410.000; $node_(67) set Y_ 1010.000; $node_(67) set Z_ 0.000
$node_(68) set X_ 610.000; $node_(68) set Y_ 1010.000; $node_(68) set Z_ 0.000
$node_(69) set X_ 810.000; $node_(69) set Y_ 1010.000; $node_(69) set Z_ 0.000
$node_(70) set X_ 1010.000; $node_(70) set Y_ 1010.000; $node_(70) set Z_ 0.000
$node_(71) set X_ 1210.000; $node_(71) set Y_ 1010.000; $node_(71) set Z_ 0.000
$node_(72) set X_ 1410.000; $node_(72) set Y_ 1010.000; $node_(72) set Z_ 0.000
$node_(73) set X_ 1610.000; $node_(73) set Y_ 1010.000; $node_(73) set Z_ 0.000
$node_(74) set X_ 1810.000; $node_(74) set Y_ 1010.000; $node_(74) set Z_ 0.000
$node_(75) set X_ 2010.000; $node_(75) set Y_ 1010.000; $node_(75) set Z_ 0.000
$node_(76) set X_ 2210.000; $node_(76) set Y_ 1010.000; $node_(76) set Z_ 0.000
$node_(77) set X_ 2410.000; $node_(77) set Y_ 1010.000; $node_(77) set Z_ 0.000
$node_(78) set X_ 10.000; $node_(78) set Y_ 1210.000; $node_(78) set Z_ 0.000
$node_(79) set X_ 210.000; $node_(79) set Y_ 1210.000; $node_(79) set Z_ 0.000
$node_(80) set X_ 410.000; $node_(80) set Y_ 1210.000; $node_(80) set Z_ 0.000
$node_(81) set X_ 610.000; $node_(81) set Y_ 1210.000; $node_(81) set Z_ 0.000
$node_(82) set X_ 810.000; $node_(82) set Y_ 1210.000; $node_(82) set Z_ 0.000
$node_(83) set X_ 1010.000; $node_(83) set Y_ 1210.000; $node_(83) set Z_ 0.000
$node_(84) set X_ 1210.000; $node_(84) set Y_ 1210.000; $node_(84) set Z_ 0.000
$node_(85) set X_ 1410.000; $node_(85) set Y_ 1210.000; $node_(85) set Z_ 0.000
$node_(86) set X_ 1610.000; $node_(86) set Y_ 1210.000; $node_(86) set Z_ 0.000
$node_(87) set X_ 1810.000; $node_(87) set Y_ 1210.000; $node_(87) set Z_ 0.000
$node_(88) set X_ 2010.000; $node_(88) set Y_ 1210.000; $node_(88) set Z_ 0.000
$node_(89) set X_ 2210.000; $node_(89) set Y_ 1210.000; $node_(89) set Z_ 0.000
$node_(90) set X_ 2410.000; $node_(90) set Y_ 1210.000; $node_(90) set Z_ 0.000
$node_(91) set X_ 10.000; $node_(91) set Y_ 1410.000; $node_(91) set Z_ 0.000
$node_(92) set X_ 210.000; $node_(92) set Y_ 1410.000; $node_(92) set Z_ 0.000
$node_(93) set X_ 410.000; $node_(93) set Y_ 1410.000; $node_(93) set Z_ 0.000
$node_(94) set X_ 610.000; $node_(94) set Y_ 1410.000; $node_(94) set Z_ 0.000
$node_(95) set X_ 810.000; $node_(95) set Y_ 1410.000; $node_(95) set Z_ 0.000
$node_(96) set X_ 1010.000; $node_(96) set Y_ 1410.000; $node_(96) set Z_ 0.000
$node_(97) set X_ 1210.000; $node_(97) set Y_ 1410.000; $node_(97) set Z_ 0.000
$node_(98) set X_ 1410.000; $node_(98) set Y_ 1410.000; $node_(98) set Z_ 0.000
$node_(99) set X_ 1610.000; $node_(99) set Y_ 1410.000; $node_(99) set Z_ 0.000
$node_(100) set X_ 1810.000; $node_(100) set Y_ 1410.000; $node_(100) set Z_ 0.000
$node_(101) set X_ 2010.000; $node_(101) set Y_ 1410.000; $node_(101) set Z_ 0.000
$node_(102) set X_ 2210.000; $node_(102) set Y_ 1410.000; $node_(102) set Z_ 0.000
$node_(103) set X_ 2410.000; $node_(103) set Y_ 1410.000; $node_(103) set Z_ 0.000
$node_(104) set X_ 10.000; $node_(104) set Y_ 1610.000; $node_(104) set Z_ 0.000
$node_(105) set X_ 210.000; $node_(105) set Y_ 1610.000; $node_(105) set Z_ 0.000
$node_(106) set X_ 410.000; $node_(106) set Y_ 1610.000; $node_(106) set Z_ 0.000
$node_(107) set X_ 610.000; $node_(107) set Y_ 1610.000; $node_(107) set Z_ 0.000
$node_(108) set X_ 810.000; $node_(108) set Y_ 1610.000; $node_(108) set Z_ 0.000
$node_(109) set X_ 1010.000; $node_(109) set Y_ 1610.000; $node_(109) set Z_ 0.000
$node_(110) set X_ 1210.000; $node_(110) set Y_ 1610.000; $node_(110) set Z_ 0.000
$node_(111) set X_ 1410.000; $node_(111) set Y_ 1610.000; $node_(111) set Z_ 0.000
$node_(112) set X_ 1610.000; $node_(112) set Y_ 1610.000; $node_(112) set Z_ 0.000
$node_(113) set X_ 1810.000; $node_(113) set Y_ 1610.000; $node_(113) set Z_ 0.000
$node_(114) set X_ 2010.000; $node_(114) set Y_ 1610.000; $node_(114) set Z_ 0.000
$node_(115) set X_ 2210.000; $node_(115) set Y_ 1610.000; $node_(115) set Z_ 0.000
$node_(116) set X_ 2410.000; $node_(116) set Y_ 1610.000; $node_(116) set Z_ 0.000
$node_(117) set X_ 10.000; $node_(117) set Y_ 1810.000; $node_(117) set Z_ 0.000
$node_(118) set X_ 210.000; $node_(118) set Y_ 1810.000; $node_(118) set Z_ 0.000
$node_(119) set X_ 410.000; $node_(119) set Y_ 1810.000; $node_(119) set Z_ 0.000
$node_(120) set X_ 610.000; $node_(120) set Y_ 1810.000; $node_(120) set Z_ 0.000
$node_(121) set X_ 810.000; $node_(121) set Y_ 1810.000; $node_(121) set Z_ 0.000
$node_(122) set X_ 1010.000; $node_(122) set Y_ 1810.000; $node_(122) set Z_ 0.000
$node_(123) set X_ 1210.000; $node_(123) set Y_ 1810.000; $node_(123) set Z_ 0.000
$node_(124) set X_ 1410.000; $node_(124) set Y_ 1810.000; $node_(124) set Z_ 0.000
$node_(125) set X_ 1610.000; $node_(125) set Y_ 1810.000; $node_(125) set Z_ 0.000
$node_(126) set X_ 1810.000; $node_(126) set Y_ 1810.000; $node_(126) set Z_ 0.000
$node_(127) set X_ 2010.000; $node_(127) set Y_ 1810.000; $node_(127) set Z_ 0.000
$node_(128) set X_ 2210.000; $node_(128) set Y_ 1810.000; $node_(128) set Z_ 0.000
$node_(129) set X_ 2410.000; $node_(129) set Y_ 1810.000; $node_(129) set Z_ 0.000
$node_(130) set X_ 10.000; $node_(130) set Y_ 2010.000; $node_(130) set Z_ 0.000
$node_(131) set X_ 210.000; $node_(131) set Y_ 2010.000; $node_(131) set Z_ 0.000
$node_(132) set X_ 410.000; $node_(132) set Y_ 2010.000; $node_(132) set Z_ 0.000
$node_(133) set X_ 610.000; $node_(133) set Y_ 2010.000; $node_(133) set Z_ 0.000
$node_(134) set X_ 810.000; $node_(134) set Y_ 2010.000; $node_(134) set Z_ 0.000
$node_(135) set X_ 1010.000; $node_(135) set Y_ 2010.000; $node_(135) set Z_ 0.000
$node_(136) set X_ 1210.000; $node_(136) set Y_ 2010.000; $node_(136) set Z_ 0.000
$node_(137) set X_ 1410.000; $node_(137) set Y_ 2010.000; $node_(137) set Z_ 0.000
$node_(138) set X_ 1610.000; $node_(138) set Y_ 2010.000; $node_(138) set Z_ 0.000
$node_(139) set X_ 1810.000; $node_(139) set Y_ 2010.000; $node_(139) set Z_ 0.000
$node_(140) set X_ 2010.000; $node_(140) set Y_ 2010.000; $node_(140) set Z_ 0.000
$node_(141) set X_ 2210.000; $node_(141) set Y_ 2010.000; $node_(141) set Z_ 0.000
$node_(142) set X_ 2410.000; $node_(142) set Y_ 2010.000; $node_(142) set Z_ 0.000
$node_(143) set X_ 10.000; $node_(143) set Y_ 2210.000; $node_(143) set Z_ 0.000
$node_(144) set X_ 210.000; $node_(144) set Y_ 2210.000; $node_(144) set Z_ 0.000
$node_(145) set X_ 410.000; $node_(145) set Y_ 2210.000; $node_(145) set Z_ 0.000
$node_(146) set X_ 610.000; $node_(146) set Y_ 2210.000; $node_(146) set Z_ 0.000
$node_(147) set X_ 810.000; $node_(147) set Y_ 2210.000; $node_(147) set Z_ 0.000
$node_(148) set X_ 1010.000; $node_(148) set Y_ 2210.000; $node_(148) set Z_ 0.000
$node_(149) set X_ 1210.000; $node_(149) set Y_ 2210.000; $node_(149) set Z_ 0.000
$node_(150) set X_ 1410.000; $node_(150) set Y_ 2210.000; $node_(150) set Z_ 0.000
$node_(151) set X_ 1610.000; $node_(151) set Y_ 2210.000; $node_(151) set Z_ 0.000
$node_(152) set X_ 1810.000; $node_(152) set Y_ 2210.000; $node_(152) set Z_ 0.000
$node_(153) set X_ 2010.000; $node_(153) set Y_ 2210.000; $node_(153) set Z_ 0.000
$node_(154) set X_ 2210.000; $node_(154) set Y_ 2210.000; $node_(154) set Z_ 0.000
$node_(155) set X_ 2410.000; $node_(155) set Y_ 2210.000; $node_(155) set Z_ 0.000
$node_(156) set X_ 10.000; $node_(156) set Y_ 2410.000; $node_(156) set Z_ 0.000
$node_(157) set X_ 210.000; $node_(157) set Y_ 2410.000; $node_(157) set Z_ 0.000
$node_(158) set X_ 410.000; $node_(158) set Y_ 2410.000; $node_(158) set Z_ 0.000
$node_(159) set X_ 610.000; $node_(159) set Y_ 2410.000; $node_(159) set Z_ 0.000
$node_(160) set X_ 810.000; $node_(160) set Y_ 2410.000; $node_(160) set Z_ 0.000
$node_(161) set X_ 1010.000; $node_(161) set Y_ 2410.000; $node_(161) set Z_ 0.000
$node_(162) set X_ 1210.000; $node_(162) set Y_ 2410.000; $node_(162) set Z_ 0.000
$node_(163) set X_ 1410.000; $node_(163) set Y_ 2410.000; $node_(163) set Z_ 0.000
$node_(164) set X_ 1610.000; $node_(164) set Y_ 2410.000; $node_(164) set Z_ 0.000
$node_(165) set X_ 1810.000; $node_(165) set Y_ 2410.000; $node_(165) set Z_ 0.000
$node_(166) set X_ 2010.000; $node_(166) set Y_ 2410.000; $node_(166) set Z_ 0.000
$node_(167) set X_ 2210.000; $node_(167) set Y_ 2410.000; $node_(167) set Z_ 0.000
$node_(168) set X_ 2410.000; $node_(168) set Y_ 2410.000; $node_(168) set Z_ 0.000

set udp_(0) [new Agent/UDP]
$ns_ attach-agent $node_(80) $udp_(0)
set sink_(0) [new Agent/LossMonitor]
$ns_ attach-agent $node_(88) $sink_(0)
$ns_ connect $udp_(0) $sink_(0)
set cbr_(0) [new Application/Traffic/CBR]
$cbr_(0) set packetSize_ 1460
$cbr_(0) set rate_ 6400000
$cbr_(0) attach-agent $udp_(0)
$ns_ at 12.000000 "$cbr_(0) start"
$ns_ at 150.000000 "$cbr_(0) stop"
set udp_(1) [new Agent/UDP]
$ns_ attach-agent $node_(32) $udp_(1)
set sink_(1) [new Agent/LossMonitor]
$ns_ attach-agent $node_(136) $sink_(1)
$ns_ connect $udp_(1) $sink_(1)
set cbr_(1) [new Application/Traffic/CBR]
$cbr_(1) set packetSize_ 1460
$cbr_(1) set rate_ 6400000
$cbr_(1) attach-agent $udp_(1)
$ns_ at 12.000000 "$cbr_(1) start"
$ns_ at 150.000000 "$cbr_(1) stop"
# Eight FTP/Reno clients into the server n84 (1460-byte segments, 40 bytes of TCP/IP header).
set k 0
foreach src {0 12 156 168 6 78 90 162} {
    set tcp_($k) [new Agent/TCP/Reno]
    $tcp_($k) set packetSize_ 1460
    $tcp_($k) set window_ 32
    $ns_ attach-agent $node_($src) $tcp_($k)
    set tsink_($k) [new Agent/TCPSink]
    $ns_ attach-agent $node_(84) $tsink_($k)
    $ns_ connect $tcp_($k) $tsink_($k)
    set ftp_($k) [new Application/FTP]
    $ftp_($k) attach-agent $tcp_($k)
    $ns_ at 0.5 "$ftp_($k) start"
    incr k
}

proc finish {} {
    global ns_ tracefd
    $ns_ flush-trace
    close $tracefd
    exit 0
}
$ns_ at 150.000000 "finish"
$ns_ run
